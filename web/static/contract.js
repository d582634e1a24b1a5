// The scripting contract (web/ui): window.logitscope exists from the
// start; body[data-state] is loading, idle, running, done or error.
// A file rather than an inline script: the page's Content-Security-Policy
// runs no inline script.
window.logitscope = window.logitscope || {};
