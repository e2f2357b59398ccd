// Local times with UTC on hover, and the authorization countdown. No inline scripts (CSP).
(function () {
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (!isNaN(when)) { el.textContent = when.toLocaleString(); }
    });
    root.querySelectorAll(".countdown[data-expires]").forEach(function (el) {
      var seconds = Math.round((new Date(el.dataset.expires) - new Date()) / 1000);
      if (isNaN(seconds)) { return; }
      if (seconds <= 0) { el.textContent = "(expired)"; return; }
      var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60);
      el.textContent = "(in " + (h ? h + " h " : "") + m + " min)";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSwap", function (event) { localise(event.detail.target.parentNode || document); });
})();
