// journal's own script (loaded from /static, as the Content-Security-Policy allows; no inline
// script or handler anywhere). htmx does the requests and htmx-ext-sse the live streams; this
// keeps an evidence line in view, and keeps a live element's place in its stream.
(function () {
  "use strict";

  // When the line a URL's #L<n> names arrives with a fragment, scroll to it.
  function showTarget() {
    var id = window.location.hash.slice(1);
    if (!id) { return; }
    var line = document.getElementById(id);
    // a row of a folded table (the throughput page's figures): its fold opened first
    var fold = line && line.closest ? line.closest("details") : null;
    if (fold && !fold.open) { fold.open = true; }
    if (line && !line.dataset.shown) {
      line.dataset.shown = "true";
      line.scrollIntoView({block: "center"});
    }
  }
  document.addEventListener("DOMContentLoaded", showTarget);
  window.addEventListener("hashchange", function () {
    var line = document.getElementById(window.location.hash.slice(1));
    if (line) { delete line.dataset.shown; }
    showTarget();
  });
  document.addEventListener("htmx:afterSettle", showTarget);

  // Each live message's id is the newest event it shows. The element that holds the stream
  // keeps it in data-last-seq and in its sse-connect URL (after=SEQ): a stream htmx opens
  // again after an error starts there, as a browser's own reconnect does (Last-Event-ID),
  // so no line or item is shown twice.
  // (Before the swap: a swap may replace the element that received the message.)
  document.addEventListener("htmx:sseBeforeMessage", function (evt) {
    var seq = evt.detail && evt.detail.lastEventId;
    var holder = evt.target.closest ? evt.target.closest("[sse-connect]") : null;
    if (!seq || !holder || !/^\d+$/.test(seq)) { return; }
    if (Number(seq) <= Number(holder.dataset.lastSeq || 0)) { return; }
    holder.dataset.lastSeq = seq;
    var url = new URL(holder.getAttribute("sse-connect"), window.location.href);
    url.searchParams.set("after", seq);
    holder.setAttribute("sse-connect", url.pathname + url.search);
  });

  // A "copy" button copies the text of the element its data-copy names (the rollback
  // command a run's page offers), and says so.
  // A filter's select (the findings page's pitfall) asks for its page when it changes; its
  // button does the same without a script.
  document.addEventListener("change", function (evt) {
    var select = evt.target;
    if (select.matches && select.matches("select[data-submit-on-change]") && select.form) {
      select.form.submit();
    }
  });

  // The throughput page's changes along the way: folded under each series' first → latest
  // row until asked for (without this script, every row shows).
  function foldAlong() {
    document.querySelectorAll("[data-along]").forEach(function (box) {
      if (box.dataset.folding) { return; }
      box.dataset.folding = "true";
      box.classList.add("along-folded");
      var toggle = box.querySelector(".along-toggle");
      if (toggle) { toggle.hidden = false; }
    });
  }
  document.addEventListener("DOMContentLoaded", foldAlong);
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("button[data-toggle-along]") : null;
    var box = button ? button.closest("[data-along]") : null;
    if (!box) { return; }
    var folded = box.classList.toggle("along-folded");
    button.textContent = folded ? button.dataset.folded : button.dataset.shown;
  });

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("button[data-copy]") : null;
    if (!button) { return; }
    var source = document.getElementById(button.dataset.copy);
    if (!source || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(source.textContent).then(function () {
      button.textContent = "copied";
      button.classList.add("copied");
    });
  });

  // A followed step's page says when the step ended and the stream closed.
  document.addEventListener("htmx:sseClose", function (evt) {
    if (evt.target && evt.target.classList) {
      evt.target.classList.remove("following");
      evt.target.classList.add("followed");
    }
  });
})();
