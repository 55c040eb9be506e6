// Package web serves `kubectl timeline --web`: a page on the loopback that
// draws an object's Events, read with the user's own kubeconfig identity, as
// `kubectl proxy` reads with it. The server is the plugin; event-apiserver
// gains no UI and no session state (docs/DESIGN: "the picture is a client").
//
// What guards it, since every local user can reach a loopback port and every
// web page the user opens can make the browser send requests to one:
//   - it listens on 127.0.0.1 only, on a port the kernel picks unless told;
//   - every path begins with a random token (256 bits, compared in constant
//     time): without it, 403. The token is in the path, not in a query as
//     Jupyter puts it, so that the page's relative URLs (its ES module
//     imports, which cannot carry a header, and its API calls) carry it
//     without a cookie, and cookies on 127.0.0.1 are shared by every port;
//   - a Host other than 127.0.0.1:<port> or localhost:<port> gets 403, so a
//     DNS name rebound to 127.0.0.1 gets nothing even with the token;
//   - Referrer-Policy: no-referrer, so no request the page makes names the
//     token in a Referer, and a Content-Security-Policy that allows only the
//     page's own origin, so it loads and sends nothing elsewhere: its HTML,
//     CSS and ES modules are embedded in the binary (no CDN, no build step);
//   - it reads only: the page's API lists Events, eventrecords and the
//     metadata of the objects a story is about, and creates counts (which
//     store nothing), never a proxy to the cluster's whole API as kubectl
//     proxy is.
//
// The page asks for a story (GET api/story), the object's Events merged
// from the live API and history as the terminal timeline merges them; with
// -w it follows new ones through server-sent events (GET api/watch), fed by
// the terminal's -w watches (the live Events, so a new Event shows when it
// is written, and where history is installed its feed, which also says when
// each Event ended), with no polling.
//
// Without an object the page opens on a namespace's (or every
// namespace's) Events over time: stacked bars from history's counts (GET
// api/counts, an eventrecordcount created with the user's identity; the
// plugin counts no records for a chart), the objects behind a bar or a
// search of the notes (GET api/objects, a bounded list of eventrecords
// counted per object), and on a fleet's hub the clusters to pick from (GET
// api/clusters, a count by cluster).
//
// The page is plain HTML, CSS, SVG and ES modules (assets/), without a
// build step: app.js routes the URL's fragment to a view, story.js is an
// object's story, model.js its lanes, chart.js and table.js its two
// renderings, overview.js the Events over time and bars.js its chart,
// api.js the calls above, dom.js what the views share.
package web
