// Rollout buckets as the official Node SDK (unleash-client, pinned in package.json) computes them, for
// flagproxy's tests (tests/sdk/oracle.py). Reads a JSON list of [groupId, id, normalizer, seed] on stdin
// and writes the list of buckets (1..normalizer) on stdout. Seed 0 is the SDK's normalizedStrategyValue
// (normalizer 100); its variant seed is normalizedVariantValue; any other seed is an error.
"use strict";
const { normalizedStrategyValue, normalizedVariantValue } = require("unleash-client/lib/strategy/util");

const VARIANT_SEED = 86028157;
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const answers = JSON.parse(input).map(([groupId, id, normalizer, seed]) => {
    if (seed === 0 && normalizer === 100) return normalizedStrategyValue(id, groupId);
    if (seed === VARIANT_SEED) return normalizedVariantValue(id, groupId, normalizer);
    throw new Error(`no SDK function for seed ${seed} and normalizer ${normalizer}`);
  });
  process.stdout.write(JSON.stringify(answers));
});
