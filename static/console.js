// Local times with UTC on hover, the authorization countdown, and htmx error
// messages. No inline scripts anywhere (the CSP forbids them).
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
      var d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600), m = Math.floor((seconds % 3600) / 60);
      el.textContent = "(in " + (d ? d + " d " : "") + (h ? h + " h " : "") + (d ? "" : m + " min") + ")";
    });
  }
  function flash(html) {
    var region = document.getElementById("flash");
    if (region) { region.innerHTML = html; }
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSwap", function (event) {
    localise(event.detail.target.parentNode || document);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) { flash(""); }
  });
  // htmx does not swap 4xx/5xx answers; show their error fragment (server-escaped) instead.
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var type = xhr.getResponseHeader("Content-Type") || "";
    if (type.indexOf("text/html") === 0 && xhr.responseText.indexOf('class="error"') !== -1) {
      flash(xhr.responseText);
    } else {
      flash('<div class="error" role="alert">The request failed (' + xhr.status + '). Reload the page and try again.</div>');
    }
  });
  document.addEventListener("htmx:sendError", function () {
    flash('<div class="error" role="alert">The console cannot be reached. Check your connection; the page retries by itself.</div>');
  });
})();
