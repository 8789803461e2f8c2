// Draws the charts from the JSON block; marks the page once every chart is drawn.
(function () {
  "use strict";
  var root = document.documentElement;
  var data = JSON.parse(document.getElementById("chart-data").textContent);
  var ids = Object.keys(data);
  if (!ids.length || typeof Plotly === "undefined") {
    root.setAttribute("data-charts-ready", "yes");
    return;
  }
  var config = {
    displaylogo: false,
    responsive: true,
    typesetMath: false,
    modeBarButtonsToRemove: ["lasso2d", "select2d"]
  };
  Promise.all(ids.map(function (id) {
    var figure = data[id];
    return Plotly.newPlot(id + "-plot", figure.data, figure.layout, config);
  })).then(function () {
    root.setAttribute("data-charts-ready", "yes");
  });
  function fit() {
    ids.forEach(function (id) { Plotly.Plots.resize(id + "-plot"); });
  }
  window.addEventListener("beforeprint", fit);
  window.addEventListener("afterprint", fit);
})();
