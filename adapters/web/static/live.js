// The page follows the log while it is open: it asks its <main>'s data-poll URL (the events past the
// page's head) every half second with the last ETag; 304 means nothing new. On anything new it fetches
// itself again and swaps its <main>, whose data-poll then names the new head. No reload, no scroll jump.
"use strict";
(function () {
  var tag = null, busy = false;
  function poll() {
    var main = document.querySelector("main[data-poll]");
    if (!main || busy) return;
    busy = true;
    var headers = tag ? { "If-None-Match": tag } : {};
    fetch(main.dataset.poll, { headers: headers, cache: "no-store" })
      .then(function (answer) {
        if (answer.status === 304 || !answer.ok) return null;
        tag = answer.headers.get("ETag");
        return answer.json();
      })
      .then(function (events) {
        if (!events || events.length === 0) return null;
        return fetch(location.href, { cache: "no-store" }).then(function (page) { return page.text(); });
      })
      .then(function (html) {
        if (!html) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        if (fresh) { main.replaceWith(document.adoptNode(fresh)); tag = null; }
      })
      .catch(function () {})
      .finally(function () { busy = false; });
  }
  setInterval(poll, 500);
})();
