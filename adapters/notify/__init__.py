"""Notifications: sinks, the changes they hear of, and their delivery by the controller."""
