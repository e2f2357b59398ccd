// Local times with UTC on hover, the authorization countdown, htmx error messages,
// copy buttons and keyboard shortcuts. No inline scripts anywhere (the CSP forbids
// them), and every page works without this file: it only adds.
(function () {
  // QUEUE-6: one rule for absolute times: every <time datetime> (the `time` helper)
  // reads in the operator's zone, and says which zone it is.
  var LOCAL_TIME = {year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
                    second: "2-digit", timeZoneName: "short"};
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (!isNaN(when)) { el.textContent = when.toLocaleString(undefined, LOCAL_TIME); }
    });
    localiseCountdowns(root);
  }
  function localiseCountdowns(root) {
    root.querySelectorAll(".countdown[data-expires]").forEach(function (el) {
      var seconds = Math.round((new Date(el.dataset.expires) - new Date()) / 1000);
      if (isNaN(seconds)) { return; }
      if (seconds <= 0) { el.textContent = el.dataset.done || "(expired)"; return; }
      var d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600), m = Math.floor((seconds % 3600) / 60);
      if (seconds < 120) { el.textContent = "(in " + seconds + " s)"; return; }
      el.textContent = "(in " + (d ? d + " d " : "") + (h ? h + " h " : "") + (d ? "" : m + " min") + ")";
    });
  }
  // QUEUE-6: the countdowns tick; a "this page follows it" notice goes once the
  // delivery panel says nothing more will happen (its data-terminal).
  setInterval(function () { localiseCountdowns(document); }, 1000);
  function dropFollowNotices() {
    var live = document.getElementById("live");
    if (live && live.dataset.terminal === "true") {
      document.querySelectorAll(".notice-follows").forEach(function (el) { el.remove(); });
    }
  }
  function flash(html) {
    var region = document.getElementById("flash");
    if (region) { region.innerHTML = html; }
  }

  // -- copy buttons: <button class="copy" data-copy="#id" hidden> (shown only here) --
  // The clipboard API where the page may use it; else the text is selected for Ctrl+C.
  function selectText(source) {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  function copyText(source, show) {
    selectText(source);  // at once: a clipboard that is refused or never answers still leaves it selected
    show("Selected: press Ctrl+C");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(source.textContent.trim()).then(function () { show("Copied"); }, function () {});
    }
  }
  function enableCopy(root) {
    root.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
      if (button.dataset.ready) { return; }
      button.dataset.ready = "1";
      button.hidden = false;
      var label = button.textContent;
      button.addEventListener("click", function () {
        var source = document.querySelector(button.dataset.copy);
        if (!source) { return; }
        clearTimeout(button.restore);
        copyText(source, function (done) { button.textContent = done; });
        button.restore = setTimeout(function () { button.textContent = label; }, 4000);
      });
    });
  }

  // -- a select of ids that offers only those of the type chosen in another select:
  //    <select data-scope-for="scope_type"> with <option data-scope-type="...">
  function fitScopes(select) {
    var chooser = document.getElementById(select.dataset.scopeFor);
    if (!chooser) { return; }
    var kind = chooser.value, first = null;
    Array.prototype.forEach.call(select.options, function (option) {
      var fits = option.dataset.scopeType === kind;
      option.hidden = !fits; option.disabled = !fits;
      if (fits && !first) { first = option; }
    });
    Array.prototype.forEach.call(select.querySelectorAll("optgroup"), function (group) {
      group.hidden = !group.querySelector("option:not([disabled])");
    });
    var chosen = select.options[select.selectedIndex];
    if (first && (!chosen || chosen.disabled)) { select.value = first.value; }
  }
  function enableScopes(root) {
    root.querySelectorAll("select[data-scope-for]").forEach(function (select) {
      if (select.dataset.ready) { return; }
      select.dataset.ready = "1";
      var chooser = document.getElementById(select.dataset.scopeFor);
      if (chooser) { chooser.addEventListener("change", function () { fitScopes(select); }); }
      fitScopes(select);
    });
  }

  // -- keyboard: j/k move through a list's rows, Enter opens, / filters, c claims, d digest or decision, ? help --
  var current = null;
  function rows() {
    var table = document.querySelector("table[data-keys=rows]");
    if (!table) { return []; }
    return Array.prototype.filter.call(table.tBodies[0] ? table.tBodies[0].rows : [], function (row) {
      return row.querySelector("a[href]") && !row.querySelector("td.more");
    });
  }
  function move(step) {
    var list = rows();
    if (!list.length) { return; }
    var index = list.indexOf(current);
    index = index < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + step));
    if (current) { current.classList.remove("kb-current"); }
    current = list[index];
    current.classList.add("kb-current");
    current.querySelector("a[href]").focus();  // Enter on the focused link opens it
  }
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function toggleHelp(show) {
    var help = document.getElementById("keys-help");
    if (help) { help.hidden = show === undefined ? !help.hidden : !show; }
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (event.key === "Escape") { toggleHelp(false); return; }
    if (typing(event.target)) { return; }
    var handled = true;
    if (event.key === "j") { move(1); }
    else if (event.key === "k") { move(-1); }
    else if (event.key === "Enter" && current && document.activeElement === document.body) {
      if (!current.isConnected && current.id) { current = document.getElementById(current.id) || current; }
      current.querySelector("a[href]").click();  // a detached link would not navigate
    }
    else if (event.key === "/") {
      var field = document.querySelector("form[data-keys=filter] input:not([type=checkbox]), form[data-keys=filter] select");
      if (field) { field.focus(); } else { handled = false; }
    }
    else if (event.key === "d") {  // an action's digest, or a queue subject's decision
      var digest = document.getElementById("payload_digest") || document.querySelector("form[data-keys=decision] select");
      if (digest) { digest.focus(); } else { handled = false; }
    }
    else if (event.key === "c") {  // claim (or release) the current queue row, or the subject on its page
      var scope = current && current.isConnected ? current : document.getElementById("claim");
      var button = scope && scope.querySelector("button[data-key=claim]");
      // htmx wires a swapped-in form only when it settles: a quick second "c" would post it plainly
      if (button && window.htmx && button.form) { window.htmx.process(button.form); }
      if (button) { button.click(); } else { handled = false; }
    }
    else if (event.key === "?") { toggleHelp(); }
    else { handled = false; }
    if (handled) { event.preventDefault(); }
  });

  document.addEventListener("DOMContentLoaded", function () { localise(document); enableCopy(document); enableScopes(document); dropFollowNotices(); });
  document.addEventListener("htmx:afterSwap", function (event) {
    var root = event.detail.target.parentNode || document;
    if (current && !current.isConnected && current.id) {  // a swapped row keeps the keyboard's place
      current = document.getElementById(current.id);
      if (current) { current.classList.add("kb-current"); current.querySelector("a[href]").focus(); }
    }
    localise(root);
    enableCopy(root);
    dropFollowNotices();
  });
  // htmx settles a swapped row's attributes after the swap, dropping the class set above
  document.addEventListener("htmx:afterSettle", function () {
    if (current && current.isConnected) { current.classList.add("kb-current"); }
  });
  document.addEventListener("htmx:oobAfterSwap", function () { localise(document); });
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
