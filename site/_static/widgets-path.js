// Where the widgets' HTML manager (widgets/embed-amd.js) finds its fonts: beside it in
// _static/widgets/, not beside the page (its default) nor on a CDN.
window.__jupyter_widgets_assets_path__ = new URL("widgets/", document.currentScript.src).href;
