// Evaluates flags for a list of contexts with an official Unleash SDK and prints what it decided.
//
// stdin: {"sdk": "unleash-client" | "unleash-proxy-client", "url", "token", "flags": [names],
//         "contexts": [context], "post": bool}
// stdout: [{name: [enabled, variantName, variantEnabled]}] (one object per context).
//
// unleash-client (the Node server SDK) reads /api/client/features and evaluates itself;
// unleash-proxy-client (the frontend SDK) asks /api/frontend (or /proxy) once per context.
import { readFileSync } from 'node:fs';
import { initialize, InMemStorageProvider } from 'unleash-client';
import { UnleashClient, InMemoryStorageProvider } from 'unleash-proxy-client';

const job = JSON.parse(readFileSync(0, 'utf8'));

function decide(isEnabled, getVariant) {
  const row = {};
  for (const name of job.flags) {
    const variant = getVariant(name);
    row[name] = [isEnabled(name), variant.name, variant.enabled];
  }
  return row;
}

async function serverSdk() {
  const client = initialize({
    url: job.url,
    appName: 'sdk-agreement',
    customHeaders: { Authorization: job.token },
    refreshInterval: 60000,
    disableMetrics: true,
    storageProvider: new InMemStorageProvider(),
  });
  client.on('error', (error) => process.stderr.write(`unleash-client: ${error}\n`));
  await new Promise((resolve, reject) => {
    client.once('synchronized', resolve);
    setTimeout(() => reject(new Error('unleash-client never synchronized')), 20000);
  });
  const rows = job.contexts.map((context) =>
    decide(
      (name) => client.isEnabled(name, context),
      (name) => client.getVariant(name, context),
    ),
  );
  client.destroy();
  return rows;
}

async function frontendSdk() {
  const client = new UnleashClient({
    url: job.url,
    clientKey: job.token,
    appName: 'sdk-agreement',
    refreshInterval: 0,
    disableRefresh: true,
    disableMetrics: true,
    usePOSTrequests: Boolean(job.post),
    storageProvider: new InMemoryStorageProvider(),
  });
  client.on('error', (error) => process.stderr.write(`unleash-proxy-client: ${JSON.stringify(error)}\n`));
  await client.start();
  const rows = [];
  for (const context of job.contexts) {
    await client.updateContext(context);
    rows.push(
      decide(
        (name) => client.isEnabled(name),
        (name) => client.getVariant(name),
      ),
    );
  }
  client.stop();
  return rows;
}

const rows = job.sdk === 'unleash-client' ? await serverSdk() : await frontendSdk();
process.stdout.write(JSON.stringify(rows));
