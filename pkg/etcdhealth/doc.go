// Package etcdhealth keeps an etcd outage from turning into hung requests.
//
// kube-apiserver, and the generic server it is built on, let a request that
// needs etcd wait in the etcd client until the request timeout (60 s by
// default) while etcd is away, then answer 504; a write that was on its way
// as etcd died gets a 500 carrying the raw gRPC error; /metrics hangs for
// 20 s a scrape. Here a Gate probes etcd every second on a client of its
// own, and once two probes in a row fail:
//
//   - every storage call that needs etcd (writes, a GET, a consistent LIST,
//     which is kubectl's default) is answered at once with 503
//     ServiceUnavailable and Retry-After 5, which client-go retries;
//   - calls already waiting for etcd end then with the same 503;
//   - lists and watches with resourceVersion=0, and open watches, go on
//     being served from the watch cache, which never needed etcd for them;
//   - /metrics answers, without the etcd size.
//
// /readyz and /livez fail on the generic server's own etcd check meanwhile,
// and /readyz on the gate's own check "etcd-writes" (Gate.WritesCheck), so a
// liveness probe must exclude etcd (/livez?exclude=etcd) and a readiness
// probe that should keep the replica in its Service while the watch cache
// serves excludes both etcd groups (/readyz?exclude=etcd&exclude=etcd-readiness;
// the server's check "watch-cache" then decides). The gate opens at the first
// probe etcd answers again: the server recovers by itself.
package etcdhealth
