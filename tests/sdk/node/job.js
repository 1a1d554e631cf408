// What the Node scripts of tests/sdk share: one JSON job read from stdin, and the official SDK's client
// for it ({url, token, appName}), with no metrics, storage on disk or instance-count warning of its own.
"use strict";
const { Unleash, InMemStorageProvider } = require("unleash-client");

exports.withJob = (run) => {
  let input = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => (input += chunk));
  process.stdin.on("end", () => run(JSON.parse(input)));
};

exports.newClient = (job, options) =>
  new Unleash({
    url: job.url,
    appName: job.appName,
    customHeaders: { Authorization: job.token },
    disableMetrics: true,
    storageProvider: new InMemStorageProvider(),
    skipInstanceCountWarning: true,
    ...options,
  });
