// The official Node SDK (unleash-client, pinned in package.json) evaluating flags for flagproxy's tests
// (tests/sdk/test_server_sdks.py). Reads one JSON job on stdin:
//   {url, token, appName, environment, flags: [name], contexts: [context]}
// connects to `url` (a flag server's /api/ or a proxy's /proxy/) with `token`, waits for the first
// synchronisation, and writes on stdout, per context, {flag: [isEnabled, {name, enabled, payload?}]}.
// Any SDK error ends it with status 2 and the error on stderr: a test never reads a half answer.
"use strict";
const { withJob, newClient } = require("./job");

withJob((job) => {
  const client = newClient(job, { environment: job.environment, refreshInterval: 60000 });
  const fail = (error) => {
    process.stderr.write(`unleash-client: ${error && error.stack ? error.stack : error}\n`);
    process.exit(2);
  };
  client.on("error", fail);
  setTimeout(() => fail("no synchronisation within 20 s"), 20000).unref();
  client.once("synchronized", () => {
    const answers = job.contexts.map((context) => {
      const answer = {};
      for (const flag of job.flags) {
        const variant = client.getVariant(flag, context);
        const shown = { name: variant.name, enabled: variant.enabled };
        if (variant.payload) shown.payload = variant.payload;
        answer[flag] = [client.isEnabled(flag, context), shown];
      }
      return answer;
    });
    client.destroy();
    process.stdout.write(JSON.stringify(answers), () => process.exit(0));
  });
});
