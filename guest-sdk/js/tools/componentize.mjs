#!/usr/bin/env node
// Builds a JavaScript kind into a Spindle component with componentize-js.
//
//   node componentize.mjs KIND.js OUT.wasm [--wit DIR] [--world NAME] [--toolchain DIR]
//                         [--features default|all] [--no-http] [--quiet]
//
// componentize-js evaluates one entry module inside the engine, and resolves only
// relative imports and the WIT interfaces (no node_modules). So the build stages the
// kind's directory and the SDK side by side, points the kind's `@spindle/guest` imports
// at the staged SDK, and writes the entry: it imports the WIT `host` and `config`
// interfaces (which exist only inside the component), binds them as the SDK's host, and
// exports the kind module's `kind` as `spindle:job/kind@0.2.0`.
//
// Features: `fetch-event` is always off (it exports `wasi:http/incoming-handler`, which
// is not in the `job-kind` world). `http` (fetch over `wasi:http/outgoing-handler`) stays
// unless --no-http. `--features all` builds with componentize-js's defaults, to compare.

import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPO = resolve(SDK_DIR, '../..');
// What the kind may not import inside the component, and why.
const HOST_ONLY = /^(node:|@spindle\/guest\/testing$)/;
const SDK_SPECIFIER = '@spindle/guest';
// Directories of the kind's folder a component never needs.
const SKIP = new Set(['node_modules', '.git', 'test', 'tests']);

function usage(message) {
  if (message) console.error(`componentize: ${message}`);
  console.error('usage: componentize.mjs KIND.js OUT.wasm [--wit DIR] [--world NAME] [--toolchain DIR] [--features default|all] [--no-http] [--quiet]');
  process.exit(2);
}

function parseArgs(argv) {
  const options = {
    wit: process.env.SPINDLE_WIT ?? join(REPO, 'wit'),
    world: 'job-kind',
    toolchain: process.env.SPINDLE_JS_TOOLCHAIN ?? join(REPO, 'target/toolchains/js'),
    features: 'default',
    http: true,
    quiet: false,
  };
  const positional = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = () => argv[++i] ?? usage(`${arg} needs a value`);
    if (arg === '--wit') options.wit = value();
    else if (arg === '--world') options.world = value();
    else if (arg === '--toolchain') options.toolchain = value();
    else if (arg === '--features') options.features = value();
    else if (arg === '--no-http') options.http = false;
    else if (arg === '--quiet') options.quiet = true;
    else if (arg.startsWith('--')) usage(`unknown option ${arg}`);
    else positional.push(arg);
  }
  if (positional.length !== 2) usage();
  if (!['default', 'all'].includes(options.features)) usage('--features is `default` or `all`');
  [options.kind, options.out] = positional.map((path) => resolve(path));
  return options;
}

/** The features to turn off: none for `all`, else fetch-event (and http if asked). */
export function disabledFeatures({ features, http }) {
  if (features === 'all') return [];
  return http ? ['fetch-event'] : ['fetch-event', 'http'];
}

async function* jsFiles(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* jsFiles(path);
    else if (/\.m?js$/.test(entry.name)) yield path;
  }
}

/**
 * Points every `@spindle/guest` import of the staged kind at the staged SDK and refuses
 * what cannot resolve inside the component.
 */
export async function link(kindDir, sdkDir, lexer) {
  for await (const file of jsFiles(kindDir)) {
    const source = await readFile(file, 'utf8');
    const [imports] = lexer.parse(source, file);
    let linked = source;
    // From the end, so the earlier offsets stay valid.
    for (const { n: name, s: start, e: end, d: dynamic } of [...imports].reverse()) {
      if (name === undefined || dynamic === -2) continue;
      const where = relative(kindDir, file);
      if (HOST_ONLY.test(name)) throw new Error(`${where} imports \`${name}\`, which does not exist inside a component`);
      let target;
      if (name === SDK_SPECIFIER) target = relative(dirname(file), join(sdkDir, 'index.js')).split(sep).join('/');
      else if (name.startsWith('.') || name.startsWith('/') || name.includes(':')) continue;
      else throw new Error(`${where} imports the package \`${name}\`: bundle it into the kind's folder first (only relative imports and @spindle/guest resolve inside a component)`);
      if (!target.startsWith('.')) target = `./${target}`;
      // A static import's span is the bare specifier; a dynamic one's includes its quotes.
      const replacement = dynamic === -1 ? target : JSON.stringify(target);
      linked = linked.slice(0, start) + replacement + linked.slice(end);
    }
    if (linked !== source) await writeFile(file, linked);
  }
}

export function entrySource(kindModule) {
  return `// Generated by @spindle/guest's componentize.mjs: the component's entry module.
import * as host from 'spindle:job/host@0.2.0';
import * as config from 'spindle:job/config@0.2.0';
import { bindWit } from './spindle-guest/component.js';
import { isKind } from './spindle-guest/index.js';
import * as definition from './kind/${kindModule}';

bindWit({ host, config });

const exported = definition.kind ?? definition.default;
if (!isKind(exported)) {
  throw new Error('${kindModule} must export \`kind\` (or a default export) made with defineKind');
}
export const kind = exported;
`;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const modules = join(resolve(options.toolchain), 'node_modules');
  const componentizeJs = join(modules, '@bytecodealliance/componentize-js/src/componentize.js');
  if (!(await stat(componentizeJs).catch(() => null))) {
    throw new Error(`componentize-js not found under ${modules}: install @bytecodealliance/componentize-js@0.23.0 there (SPINDLE_JS_TOOLCHAIN)`);
  }
  const { componentize } = await import(pathToFileURL(componentizeJs).href);
  const lexer = await import(pathToFileURL(join(modules, 'es-module-lexer/dist/lexer.js')).href);
  await lexer.init;

  const staging = await mkdtemp(join(tmpdir(), 'spindle-componentize-'));
  const started = performance.now();
  try {
    const kindDir = join(staging, 'kind');
    const sdkDir = join(staging, 'spindle-guest');
    await cp(dirname(options.kind), kindDir, {
      recursive: true,
      // A project made by `spindle new` keeps the SDK beside the kind: it is staged below.
      filter: (path) => !SKIP.has(basename(path)) && !path.endsWith('.wasm') && resolve(path) !== SDK_DIR,
    });
    // The runner (testing.js) is Node-only and never part of a component.
    await cp(join(SDK_DIR, 'src'), sdkDir, { recursive: true, filter: (path) => basename(path) !== 'testing.js' });
    await link(kindDir, sdkDir, lexer);
    const entry = join(staging, 'entry.js');
    await writeFile(entry, entrySource(relative(dirname(options.kind), options.kind).split(sep).join('/')));

    const disableFeatures = disabledFeatures(options);
    // componentize-js maps the source's directory into the engine relative to the cwd.
    const cwd = process.cwd();
    process.chdir(staging);
    let result;
    try {
      result = await componentize({ sourcePath: entry, witPath: resolve(options.wit), worldName: options.world, disableFeatures });
    } finally {
      process.chdir(cwd);
    }
    await mkdir(dirname(options.out), { recursive: true });
    await writeFile(options.out, result.component);
    if (!options.quiet) {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const kib = (result.component.byteLength / 1024).toFixed(0);
      console.error(`componentize: ${options.out} (${kib} KiB, ${seconds} s; disabled features: ${disableFeatures.join(', ') || 'none'})`);
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(`componentize: ${error.message ?? error}`);
    process.exit(1);
  });
}
