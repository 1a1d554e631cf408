// The official Node SDK (unleash-client, pinned in package.json) following a flag server's changes for
// tests/sdk/test_realtime_sdks.py. Reads one JSON job on stdin:
//   {url, token, appName, mode: {type: "streaming"} | {type: "polling", format: "delta"}, refreshInterval}
// and writes one JSON line on stdout per `changed` event: {"flags": {name: enabled}, "at": wall-clock ms}, and
// {"mode": {from, to}} when the SDK switches between streaming and polling. Errors and warnings go to
// stderr; the test ends it (SIGTERM).
"use strict";
const { UnleashEvents } = require("unleash-client");
const { withJob, newClient } = require("./job");

withJob((job) => {
  const client = newClient(job, { refreshInterval: job.refreshInterval, experimentalMode: job.mode });
  const write = (line) => process.stdout.write(JSON.stringify(line) + "\n");
  client.on("changed", (features) => {
    const flags = {};
    for (const feature of features) flags[feature.name] = feature.enabled;
    write({ flags, at: performance.timeOrigin + performance.now() }); // wall clock, ms (benchmarks)
  });
  // unleash-client does not pass its repository's Mode event on: listen where it is emitted.
  client.repository.on(UnleashEvents.Mode, (change) => write({ mode: change }));
  client.on("error", (error) => process.stderr.write(`error: ${error && error.message}\n`));
  client.on("warn", (message) => process.stderr.write(`warn: ${message}\n`));
  // The SDK's poll timer does not keep Node alive (unref): this does, until the test stops it.
  const alive = setInterval(() => {}, 1 << 30);
  process.on("SIGTERM", () => {
    clearInterval(alive);
    client.destroy();
    process.exit(0);
  });
});
