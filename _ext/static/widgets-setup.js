// Loaded before RequireJS and the Jupyter widgets HTML manager (@jupyter-widgets/html-manager
// 1.0.x) on pages that show widgets, after the page's MathJax configuration.
//
// 1. RequireJS configuration: the manager's bundle defines AMD modules named
//    "@jupyter-widgets/html-manager", "@jupyter-widgets/base", ... and loads its icon fonts (Font
//    Awesome) from the folder RequireJS resolves those names to: by default the page's folder
//    plus "@jupyter-widgets/", where nothing is served (every icon font then fails with 404).
//    Map both "@jupyter-widgets" and "@jupyter-widgets/html-manager/dist" to the copy the book
//    serves in _static/vendor/html-manager/, beside the fonts (a global `require` object set
//    before require.js loads is its configuration).
// 2. MathJax: the manager typesets widget labels with the MathJax 2 call
//    MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]). The book loads MathJax 3, which has no
//    Hub, so that call fails with "Cannot read properties of undefined (reading 'Queue')". This
//    gives MathJax 3 that one call, before MathJax has started (window.MathJax is then the
//    configuration object) and after.
(function () {
  "use strict";
  const vendor = new URL("vendor/html-manager", document.currentScript.src).href;
  window.require = {
    paths: { "@jupyter-widgets": vendor, "@jupyter-widgets/html-manager/dist": vendor },
  };
})();

(function () {
  "use strict";
  const config = window.MathJax;
  if (typeof config !== "object" || config === null || config.version) {
    return; // no MathJax on this page, or MathJax has already started
  }
  const waiting = [];

  function typeset(element) {
    const mathjax = window.MathJax;
    if (mathjax && mathjax.typesetPromise && mathjax.startup && mathjax.startup.promise) {
      mathjax.startup.promise = mathjax.startup.promise
        .then(() => mathjax.typesetPromise([element]))
        .catch((error) => console.error("MathJax could not typeset a widget label:", error));
    } else {
      waiting.push(element); // typeset once MathJax is ready
    }
  }

  const hub = {
    Queue(...calls) {
      for (const call of calls) {
        if (Array.isArray(call) && call[0] === "Typeset" && call[2]) {
          typeset(call[2]);
        }
      }
    },
  };

  // Before MathJax starts, window.MathJax is this configuration object ...
  config.Hub = hub;
  // ... and when it has started, window.MathJax is MathJax 3 itself.
  const startup = config.startup || (config.startup = {});
  const ready = startup.ready;
  startup.ready = function () {
    if (ready) {
      ready();
    } else {
      window.MathJax.startup.defaultReady();
    }
    window.MathJax.Hub = hub;
    for (const element of waiting.splice(0)) {
      typeset(element);
    }
  };
})();
