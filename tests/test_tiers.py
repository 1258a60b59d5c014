"""Every test module is in the fast tier or marked slow, so `python -m pytest -m "not slow"` stays quick.

A new test module must be placed consciously: listed in FAST (its unmarked tests together take
seconds; a slow test inside one carries `@pytest.mark.slow` itself), or marked as a whole with
`pytestmark = pytest.mark.slow` (real processes, controllers, e2e scenarios, chaos, long runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FAST = {
    "test_tiers.py",
    "test_layers.py",
    "test_imports.py",
    "test_names.py",
    "test_library_privates.py",
    "test_types.py",
    "test_sizes.py",
    "unit/test_condition.py",
    "integration/analysis/test_http_provider.py",
    "unit/test_analysis_template.py",
    "unit/test_lazy_commands.py",
    "unit/test_fencing.py",
    "integration/storage/test_notifier_durability.py",
    "unit/test_audit.py",
    "unit/test_backend_probes.py",
    "unit/test_steps.py",
    "integration/steps/test_steps_cli.py",
    "unit/test_chaos_checks.py",
    "unit/test_chaos_steps.py",
    "unit/test_chaos_templates.py",
    "unit/test_step_audit_templates.py",
    "unit/test_read_healing.py",
    "unit/test_view_rows.py",
    "unit/test_key_filter.py",
    "unit/test_phase_table.py",
    "unit/test_audit_memory.py",
    "unit/test_chain.py",
    "unit/test_config_rules.py",
    "unit/test_docs.py",
    "unit/test_deployment_phases.py",
    "unit/test_error_table.py",
    "unit/test_executor_guards.py",
    "unit/test_launch.py",
    "unit/test_log_move_domain.py",
    "unit/test_notification.py",
    "unit/test_phase_fold.py",
    "unit/test_plan.py",
    "unit/test_runtime_port.py",
    "unit/test_step.py",
    "unit/test_stillness.py",
    "unit/test_spec.py",
    "unit/test_stage_audit.py",
    "unit/test_stage_rules.py",
    "unit/test_sql_lists.py",
    "unit/test_gate_rules.py",
    "integration/controller/test_idle_pass_scale.py",
    "unit/test_approval_rules.py",
    "unit/test_bench_figures.py",
    "unit/test_timeline.py",
    "integration/log/test_audit_bad_history.py",
    "integration/gates/test_gates_audit.py",
    "integration/gates/test_gates_guard.py",
    "integration/gates/test_gates_cli.py",
    "integration/gates/test_gates_identity.py",
    "integration/cli/test_cli_edges.py",
    "integration/cli/test_cli_errors.py",
    "integration/cli/test_cli_verbs.py",
    "integration/log/test_events_paging.py",
    "integration/bench/test_sink_server.py",
    "integration/bench/test_bench_commands.py",
    "integration/notify/test_notify_cli.py",
    "integration/storage/test_preload.py",
    "integration/projections/test_projections.py",
    "integration/log/test_save_conflicts.py",
    "integration/serve/test_serve_routes.py",
    "integration/cli/test_settings_env.py",
    "integration/serve/test_metrics_text.py",
    "property/test_model.py",
}


def marked_slow(path: Path) -> bool:
    """Whether the module sets `pytestmark` to `pytest.mark.slow` (alone or in a list)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            return any(ast.unparse(v) == "pytest.mark.slow" for v in values)
    return False


def test_every_test_module_is_in_the_fast_tier_or_marked_slow() -> None:
    modules = {str(p.relative_to(TESTS)): p for p in TESTS.rglob("test_*.py")}
    unplaced = [name for name, path in sorted(modules.items()) if name not in FAST and not marked_slow(path)]
    assert not unplaced, f"list these in FAST in tests/test_tiers.py, or set pytestmark = pytest.mark.slow: {unplaced}"
    both = [name for name in sorted(FAST) if name in modules and marked_slow(modules[name])]
    assert not both, f"marked slow as a whole, yet listed in FAST: {both}"
    assert not FAST - set(modules), f"FAST lists modules that do not exist: {sorted(FAST - set(modules))}"
