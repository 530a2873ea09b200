// Sortable tables: click a header of a table.sortable to sort its rows (again to reverse).
// A cell's data-sort-value wins over its text; headers with data-sort="num" sort numerically
// (empty values last).
(function () {
  "use strict";
  function key(cell, numeric) {
    if (!cell) { return numeric ? null : ""; }
    var raw = cell.dataset.sortValue !== undefined ? cell.dataset.sortValue : cell.textContent.trim();
    if (!numeric) { return raw.toLowerCase(); }
    var v = parseFloat(String(raw).replace(/[^0-9eE.+-]/g, ""));
    return isFinite(v) ? v : null;
  }
  function sortBy(table, th, index) {
    var numeric = th.dataset.sort === "num";
    var asc = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (ra, rb) {
      var a = key(ra.cells[index], numeric), b = key(rb.cells[index], numeric);
      if (a === null && b === null) { return 0; }
      if (a === null) { return 1; }
      if (b === null) { return -1; }
      var c = a < b ? -1 : a > b ? 1 : 0;
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var head = table.tHead && table.tHead.rows[0];
    if (!head) { return; }
    Array.prototype.forEach.call(head.cells, function (th, index) {
      th.classList.add("sort-header");
      th.title = "sort by " + th.textContent.trim();
      th.addEventListener("click", function () { sortBy(table, th, index); });
    });
  });
})();
