// The review page's keys: p pass, f fail, 1-5 a rating, n the note, j / k next / previous row.
// It only clicks the page's own buttons and links; it writes nothing into the page.
(function () {
  "use strict";
  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT" || el.isContentEditable);
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    if (typing(document.activeElement)) {
      if (ev.key === "Escape") { document.activeElement.blur(); }
      return;
    }
    var key = ev.key.toLowerCase();
    if (key === "n") {
      var note = document.getElementById("note");
      if (note) { ev.preventDefault(); note.focus(); }
      return;
    }
    if (key === "j" || key === "k") {
      var link = document.getElementById(key === "j" ? "next" : "prev");
      if (link) { ev.preventDefault(); window.location.assign(link.getAttribute("href")); }
      return;
    }
    var button = document.querySelector('#label-form button[data-key="' + key + '"]');
    if (button && /^[pf1-5]$/.test(key)) { ev.preventDefault(); button.click(); }
  });
}());
