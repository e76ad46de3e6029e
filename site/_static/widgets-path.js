// Where the widgets' HTML manager (widgets/embed-amd.js) and its fonts are: _static/widgets/.
// The manager's modules are require.js modules named "@jupyter-widgets/..."; each finds its
// fonts beside the address require.js gives its name, which is beside the page unless these
// paths say otherwise. A `require` object set before require.js loads is its configuration.
(function () {
  const widgets = new URL("widgets", document.currentScript.src).href;
  window.require = {
    paths: { "@jupyter-widgets/html-manager/dist": widgets, "@jupyter-widgets": widgets },
  };
  window.__jupyter_widgets_assets_path__ = widgets + "/";
})();
