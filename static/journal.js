// journal's own script (loaded from /static, as the Content-Security-Policy allows; no inline
// script or handler anywhere). htmx does the requests; this only keeps an evidence line in
// view: when the line a URL's #L<n> names arrives with a fragment, scroll to it.
(function () {
  "use strict";
  function showTarget() {
    var id = window.location.hash.slice(1);
    if (!id) { return; }
    var line = document.getElementById(id);
    if (line && !line.dataset.shown) {
      line.dataset.shown = "true";
      line.scrollIntoView({block: "center"});
    }
  }
  document.addEventListener("DOMContentLoaded", showTarget);
  document.addEventListener("htmx:afterSettle", showTarget);
})();
