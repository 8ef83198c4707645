'use strict';
// The wophost plugin protocol (docs/protocol.md) in Node.js, with no SDK:
// the handshake, the launch's mutual TLS, the services go-plugin expects
// (health, controller, broker), the error envelope, the log lines and the
// parent watch. index.js is the plugin built on it.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

// The repository's proto files: wophost.proto and the third-party files a
// plugin in another language needs beside it.
const PROTO_DIR = path.join(__dirname, '..', '..', '..', 'sdk', 'proto');
const PROTO_DIRS = [PROTO_DIR, path.join(PROTO_DIR, 'thirdparty')];
const PROTO_FILES = [
  'wophost/v1/wophost.proto',
  'grpc/health/v1/health.proto',
  'hashicorp/go-plugin/grpc_controller.proto',
  'hashicorp/go-plugin/grpc_broker.proto',
  'google/rpc/status.proto',
];

// The handshake's fixed values.
const MAGIC_COOKIE_KEY = 'WOPHOST_PLUGIN_COOKIE';
const MAGIC_COOKIE_VALUE = 'c0a6f3e2-wophost-plugin-9d51b7';
const CORE_PROTOCOL_VERSION = 1; // go-plugin's
const APP_PROTOCOL_VERSION = 1; // wophost's

const DEFAULT_MAX_MESSAGE_BYTES = 16 << 20;

// The gRPC status code each contract code travels with; any other code
// (a family's own, "acme.key_not_found") travels with UNKNOWN.
const GRPC_CODE = {
  deadline_exceeded: grpc.status.DEADLINE_EXCEEDED,
  cancelled: grpc.status.CANCELLED,
  not_found: grpc.status.NOT_FOUND,
  validation_error: grpc.status.INVALID_ARGUMENT,
  unavailable: grpc.status.UNAVAILABLE,
  capability_not_provided: grpc.status.FAILED_PRECONDITION,
  host_capability_missing: grpc.status.FAILED_PRECONDITION,
  capability_not_declared: grpc.status.PERMISSION_DENIED,
  internal: grpc.status.INTERNAL,
};

const ERROR_DETAIL_TYPE_URL = 'type.googleapis.com/wophost.v1.ErrorDetail';

// WopError is a failure in the contract's error envelope.
class WopError extends Error {
  constructor(code, message, { capability = '', retryable = false, details } = {}) {
    super(message);
    this.code = code;
    this.capability = capability;
    this.retryable = retryable;
    this.details = details;
  }
}

// deadlineOf is the deadline of a call context in milliseconds since the
// epoch, Infinity when it has none. deadline_unix_nano is an int64 read as
// a string, beyond a JavaScript number's exact range.
function deadlineOf(call) {
  return Number(BigInt(call.deadlineUnixNano || 0) / 1000000n) || Infinity;
}

// The longest delay a Node timer keeps; a longer one fires at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

// How early before a call's deadline gRPC may end it for the deadline
// (see callSignal).
const DEADLINE_EARLY_MS = 50;

// callSignal returns the signal of the Invoke call serves, which aborts
// when the host cancels the call or its deadline passes, with the
// WopError the host answers then as the reason, and a function that
// releases its listener and timer once the handler is done.
function callSignal(call, deadline, capability) {
  const abort = new AbortController();
  const fail = (code, message) => abort.abort(new WopError(code, message, { capability }));
  const expired = () => fail('deadline_exceeded', `the deadline of ${capability} passed`);
  // gRPC ends a call whose deadline passed as it ends a cancelled one,
  // and may end it a little before the deadline by the host's clock:
  // grpc-js counts the timeout in whole milliseconds from the call's
  // arrival, and libuv's timers from the event loop's cached time, which
  // lags on a busy machine. An end within DEADLINE_EARLY_MS of the
  // deadline is the deadline's.
  const cancelled = () => (Date.now() >= deadline - DEADLINE_EARLY_MS ? expired() : fail('cancelled', `the call to ${capability} was cancelled`));
  call.on('cancelled', cancelled);
  const wait = deadline - Date.now();
  // A deadline beyond a timer's reach (about 24 days) is left to gRPC.
  const timer = wait <= MAX_TIMER_MS ? setTimeout(expired, Math.max(wait, 0)) : undefined;
  return {
    signal: abort.signal,
    release: () => {
      clearTimeout(timer);
      call.removeListener('cancelled', cancelled);
    },
  };
}

// logger writes hclog's JSON lines on stderr, which the host parses and
// re-emits under the plugin's name at the level each line names.
function logger(name) {
  const levels = ['trace', 'debug', 'info', 'warn', 'error'];
  const min = levels.indexOf((process.env.WOPHOST_LOG_LEVEL || 'info').toLowerCase());
  const log = (level) => (message, fields = {}) => {
    if (min < 0 || levels.indexOf(level) < min) return;
    // go-plugin parses @timestamp with exactly six fractional digits;
    // another form makes it drop the line's level.
    const timestamp = new Date().toISOString().replace('Z', '000Z');
    process.stderr.write(JSON.stringify({
      '@level': level, '@message': message, '@module': name, '@timestamp': timestamp, ...fields,
    }) + '\n');
  };
  return Object.fromEntries(levels.map((l) => [l, log(l)]));
}

// readLaunchTLS reads the key material the host hands over on the
// descriptor WOPHOST_TLS_FD names: the plugin's certificate, its EC
// private key, then the host's certificate, in PEM.
function readLaunchTLS() {
  const fd = Number(process.env.WOPHOST_TLS_FD);
  if (!Number.isInteger(fd) || fd < 3) {
    throw new Error('WOPHOST_TLS_FD names no inherited descriptor: start this plugin from the host');
  }
  const bundle = fs.readFileSync(fd, 'utf8');
  fs.closeSync(fd);
  delete process.env.WOPHOST_TLS_FD;
  const blocks = [...bundle.matchAll(/-----BEGIN ([A-Z ]+)-----\r?\n[\s\S]*?-----END \1-----\r?\n?/g)];
  if (blocks.length !== 3 || blocks[0][1] !== 'CERTIFICATE' || blocks[1][1] !== 'EC PRIVATE KEY' || blocks[2][1] !== 'CERTIFICATE') {
    throw new Error('WOPHOST_TLS_FD: want a certificate, its EC private key and the host\'s certificate');
  }
  const [cert, key, hostCert] = blocks.map((b) => Buffer.from(b[0]));
  return { cert, key, hostCert };
}

// der encodes one DER element: tag, length, contents.
function der(tag, ...contents) {
  const body = Buffer.concat(contents);
  const n = body.length;
  const len = n < 0x80 ? Buffer.from([n])
    : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
}

// utcTime is an X.509 UTCTime, YYMMDDHHMMSSZ (years up to 2049).
function utcTime(date) {
  return der(0x17, Buffer.from(date.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'));
}

// autoMTLS is go-plugin's AutoMTLS, for a host that hands over no key
// material: a fresh P-256 key and a self-signed certificate for localhost,
// usable as server and client, trusting the host's certificate of
// PLUGIN_CLIENT_CERT. Node has no certificate builder, so the DER is
// written here.
function autoMTLS() {
  const hostCert = process.env.PLUGIN_CLIENT_CERT;
  if (!hostCert) {
    throw new Error('neither WOPHOST_TLS_FD nor PLUGIN_CLIENT_CERT is set: start this plugin from the host');
  }
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaWithSHA256 = der(0x30, Buffer.from('06082a8648ce3d040302', 'hex'));
  const name = der(0x30, der(0x31, der(0x30, Buffer.from('0603550403', 'hex'), der(0x0c, Buffer.from('localhost')))));
  const serial = crypto.randomBytes(16);
  serial[0] = (serial[0] & 0x7f) | 0x40; // positive, no leading zero
  const now = Date.now();
  const extensions = der(0xa3, der(0x30,
    // keyUsage, critical: digitalSignature
    der(0x30, Buffer.from('0603551d0f', 'hex'), der(0x01, Buffer.from([0xff])), der(0x04, der(0x03, Buffer.from([0x07, 0x80])))),
    // extKeyUsage: serverAuth, clientAuth
    der(0x30, Buffer.from('0603551d25', 'hex'), der(0x04, der(0x30,
      Buffer.from('06082b06010505070301', 'hex'), Buffer.from('06082b06010505070302', 'hex')))),
    // subjectAltName: DNS localhost
    der(0x30, Buffer.from('0603551d11', 'hex'), der(0x04, der(0x30, der(0x82, Buffer.from('localhost'))))),
  ));
  const tbs = der(0x30,
    der(0xa0, der(0x02, Buffer.from([2]))), // v3
    der(0x02, serial),
    ecdsaWithSHA256,
    name,
    der(0x30, utcTime(new Date(now - 60e3)), utcTime(new Date(now + 10 * 365 * 864e5))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions);
  const signature = crypto.sign('sha256', tbs, privateKey);
  const certDER = der(0x30, tbs, ecdsaWithSHA256, der(0x03, Buffer.from([0]), signature));
  const cert = `-----BEGIN CERTIFICATE-----\n${certDER.toString('base64').match(/.{1,64}/g).join('\n')}\n-----END CERTIFICATE-----\n`;
  return {
    cert: Buffer.from(cert),
    key: Buffer.from(privateKey.export({ type: 'pkcs8', format: 'pem' })),
    hostCert: Buffer.from(hostCert),
  };
}

// handshakeLine is the line go-plugin's host reads on stdout. The sixth
// field is the plugin's certificate: DER, standard base64 without padding.
function handshakeLine(socketPath, certPEM) {
  const der = new crypto.X509Certificate(certPEM).raw;
  const cert = der.toString('base64').replace(/=+$/, '');
  return `${CORE_PROTOCOL_VERSION}|${APP_PROTOCOL_VERSION}|unix|${socketPath}|grpc|${cert}\n`;
}

// loadProtos loads the services for grpc-js and the two messages the
// error envelope is built of for protobufjs.
function loadProtos() {
  const def = protoLoader.loadSync(PROTO_FILES, {
    includeDirs: PROTO_DIRS, longs: String, enums: String, defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def);
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    for (const dir of PROTO_DIRS) {
      const p = path.join(dir, target);
      if (fs.existsSync(p)) return p;
    }
    return target; // protobufjs's own well-known types
  };
  root.loadSync(['wophost/v1/wophost.proto', 'google/rpc/status.proto']);
  return {
    pkg,
    Status: root.lookupType('google.rpc.Status'),
    ErrorDetail: root.lookupType('wophost.v1.ErrorDetail'),
  };
}

// toStatus turns err into what a grpc-js handler returns: the gRPC code
// of the envelope's code, and the envelope as a google.rpc.Status in the
// grpc-status-details-bin trailer.
function toStatus(protos, err) {
  const we = err instanceof WopError ? err : new WopError('internal', String(err && err.message || err));
  const detail = protos.ErrorDetail.encode({
    code: we.code, message: we.message, capability: we.capability, retryable: we.retryable,
    details: we.details === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(we.details)),
  }).finish();
  const code = GRPC_CODE[we.code] ?? grpc.status.UNKNOWN;
  const st = protos.Status.encode({
    code, message: we.message, details: [{ type_url: ERROR_DETAIL_TYPE_URL, value: detail }],
  }).finish();
  const metadata = new grpc.Metadata();
  metadata.set('grpc-status-details-bin', Buffer.from(st));
  return { code, details: we.message, metadata };
}

// fromStatus turns a failed call's error back into a WopError: the
// envelope when the status carries one, else a code from the gRPC code.
function fromStatus(protos, err) {
  const [bin] = err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (bin) {
    const st = protos.Status.decode(bin);
    for (const any of st.details) {
      if (any.type_url === ERROR_DETAIL_TYPE_URL) {
        const d = protos.ErrorDetail.decode(any.value);
        return new WopError(d.code, d.message, {
          capability: d.capability, retryable: d.retryable,
          details: d.details.length ? JSON.parse(Buffer.from(d.details).toString()) : undefined,
        });
      }
    }
  }
  switch (err.code) {
    case grpc.status.DEADLINE_EXCEEDED: return new WopError('deadline_exceeded', err.details);
    case grpc.status.CANCELLED: return new WopError('cancelled', err.details);
    case grpc.status.UNAVAILABLE: return new WopError('unavailable', err.details, { retryable: true });
    case grpc.status.NOT_FOUND: return new WopError('not_found', err.details);
    case grpc.status.INVALID_ARGUMENT: return new WopError('validation_error', err.details);
    default: return new WopError('internal', err.details || String(err));
  }
}

// Broker receives, on the stream the host opens to go-plugin's
// GRPCBroker, where the host serves each broker id, and hands it to whoever
// waits for that id.
class Broker {
  constructor() {
    this.known = new Map();
    this.waiting = new Map();
  }

  // startStream is GRPCBroker.StartStream: the host sends a ConnInfo for
  // each id it serves on.
  startStream(stream) {
    stream.on('data', (info) => {
      this.known.set(info.serviceId, info);
      for (const resolve of this.waiting.get(info.serviceId) || []) resolve(info);
      this.waiting.delete(info.serviceId);
    });
    stream.on('error', () => {});
    stream.on('end', () => stream.end());
  }

  // connInfo resolves to the ConnInfo of id once the host has sent it.
  connInfo(id) {
    if (this.known.has(id)) return Promise.resolve(this.known.get(id));
    return new Promise((resolve) => {
      this.waiting.set(id, [...(this.waiting.get(id) || []), resolve]);
    });
  }
}

// HostCaller calls HostServices.Call on the connection the host serves on
// a broker id: the plugin dials it as a TLS client, with its own
// certificate, trusting the host's alone.
class HostCaller {
  constructor(protos, broker, id, tls, maxBytes) {
    this.protos = protos;
    this.client = broker.connInfo(id).then((info) => {
      const target = info.network === 'unix' ? `unix:${info.address}` : info.address;
      const creds = grpc.credentials.createSsl(tls.hostCert, tls.key, tls.cert);
      return new protos.pkg.wophost.v1.HostServices(target, creds, {
        'grpc.ssl_target_name_override': 'localhost',
        'grpc.default_authority': 'localhost',
        'grpc.max_receive_message_length': maxBytes,
        'grpc.max_send_message_length': maxBytes,
      });
    });
  }

  // call sends a JSON request to family.method with the call context of
  // the Invoke it serves, which carries the run's token back to the host,
  // and cancels it when signal aborts, failing with the signal's reason.
  async call(call, family, method, request, signal) {
    const client = await this.client;
    signal.throwIfAborted();
    return new Promise((resolve, reject) => {
      const cancel = () => pending.cancel();
      const pending = client.Call({ family, method, payload: Buffer.from(JSON.stringify(request)), call },
        { deadline: deadlineOf(call) },
        (err, resp) => {
          signal.removeEventListener('abort', cancel);
          if (err) return reject(signal.aborted ? signal.reason : fromStatus(this.protos, err));
          resolve(JSON.parse(Buffer.from(resp.result).toString()));
        });
      signal.addEventListener('abort', cancel, { once: true });
    });
  }
}

// parentGone reports whether the process whose pid was parent is no
// longer this process's parent. Node reads process.ppid once, at start, so
// it never changes: Linux's /proc says who the parent is now; elsewhere a
// signal 0 says whether the parent still exists.
function parentGone(parent) {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent;
  } catch {
    try {
      process.kill(parent, 0);
      return false;
    } catch (err) {
      return err.code === 'ESRCH';
    }
  }
}

// watchParent exits once the host is gone, so that no plugin outlives a
// host killed with SIGKILL.
function watchParent(log, onExit) {
  const parent = process.ppid;
  if (parent <= 1) return;
  setInterval(() => {
    if (parentGone(parent)) {
      log.warn('host process is gone; exiting', { parent_pid: parent });
      onExit();
      process.exit(3);
    }
  }, 500).unref();
}

// serve runs plugin p until the host stops it. p has name, version,
// families ({name, status, since, until, witness, methods: {name: handler},
// needs, uses, pure}), configSchema (the JSON form of schema.Block),
// configure(config, ctx) returning diagnostics or nothing, and shutdown().
// A handler is called with the request and ctx: {call, log, signal,
// host(family, method, request)}; signal aborts when the call is cancelled
// or its deadline passes.
function serve(p) {
  if (process.env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    process.stderr.write('This binary is a wophost plugin; the host starts it.\n');
    process.exit(1);
  }
  const offered = (process.env.PLUGIN_PROTOCOL_VERSIONS || '').split(',');
  if (!offered.includes(String(APP_PROTOCOL_VERSION))) {
    process.stderr.write(`the host offers protocol versions ${offered}; this plugin speaks ${APP_PROTOCOL_VERSION}\n`);
    process.exit(1);
  }
  const name = process.env.WOPHOST_PLUGIN_NAME || p.name;
  const log = logger(name);
  const maxBytes = Number(process.env.WOPHOST_MAX_MESSAGE_BYTES) || DEFAULT_MAX_MESSAGE_BYTES;
  // The host's key pair when it hands one over, go-plugin's AutoMTLS
  // otherwise (a plain go-plugin host).
  const tls = process.env.WOPHOST_TLS_FD ? readLaunchTLS() : autoMTLS();
  const protos = loadProtos();
  const broker = new Broker();
  const families = new Map(p.families.map((f) => [f.name, f]));
  let configured = false;
  let host = null;
  let stopping = false;

  const server = new grpc.Server({
    'grpc.max_receive_message_length': maxBytes,
    'grpc.max_send_message_length': maxBytes,
  });
  const stop = () => {
    if (stopping) return;
    stopping = true;
    if (p.shutdown) p.shutdown();
    // Calls in flight get a moment to end; the host waits 2 s in all.
    const force = setTimeout(() => server.forceShutdown(), 500);
    server.tryShutdown(() => {
      clearTimeout(force);
      process.exit(0);
    });
  };

  server.addService(protos.pkg.wophost.v1.Capability.service, {
    Describe(_call, cb) {
      cb(null, {
        name: p.name, version: p.version, singleWriter: false,
        families: p.families.map((f) => ({
          name: f.name, status: f.status, since: f.since, until: f.until, witness: f.witness,
          methods: Object.keys(f.methods).sort(), needs: f.needs || [], uses: f.uses || [],
          pureMethods: [...(f.pure || [])].sort(),
        })),
      });
    },
    ConfigSchema(_call, cb) {
      cb(null, { schema: Buffer.from(JSON.stringify(p.configSchema)) });
    },
    Configure(call, cb) {
      const req = call.request;
      if (!host && req.hostServicesBrokerId) {
        host = new HostCaller(protos, broker, req.hostServicesBrokerId, tls, maxBytes);
      }
      let diagnostics;
      try {
        diagnostics = p.configure(JSON.parse(Buffer.from(req.config).toString() || '{}'), { stateDir: req.stateDir, log });
      } catch (err) {
        return cb(toStatus(protos, err));
      }
      if (diagnostics && diagnostics.length) {
        return cb(null, { diagnostics });
      }
      configured = true;
      const facets = Object.fromEntries(p.families.map((f) => [f.name, Buffer.from('{}')]));
      cb(null, { facets });
    },
    async Invoke(call, cb) {
      const { family, method, payload } = call.request;
      const capability = `host.${family}.${method}`;
      const fail = (code, message, opts = {}) => cb(toStatus(protos, new WopError(code, message, { capability, ...opts })));
      if (!configured) {
        return fail('unavailable', `plugin ${p.name} is not configured yet`, { retryable: true });
      }
      const f = families.get(family);
      if (!f) return fail('not_found', `plugin ${p.name} does not serve family "${family}"`);
      const handler = f.methods[method];
      if (!handler) return fail('not_found', `family ${family} has no method "${method}"`);
      let input;
      try {
        input = JSON.parse(Buffer.from(payload).toString());
      } catch (err) {
        return fail('validation_error', `request of ${capability} is not JSON: ${err.message}`);
      }
      // The call context goes back unchanged with every callback.
      const callContext = call.request.call || {};
      // ctx.signal tells the handler when nobody waits for its answer any
      // more; it cancels the handler's callbacks too.
      const { signal, release } = callSignal(call, deadlineOf(callContext), capability);
      const ctx = {
        call: callContext,
        log,
        signal,
        host: (fam, meth, request) => host
          ? host.call(callContext, fam, meth, request, signal)
          : Promise.reject(new WopError('capability_not_provided', `host.${fam}.${meth} is not provided`)),
      };
      try {
        const out = await handler(input, ctx);
        cb(null, { result: Buffer.from(JSON.stringify(out)) });
      } catch (err) {
        if (!(err instanceof WopError)) log.error('handler failed', { capability, error: String(err) });
        if (err instanceof WopError && !err.capability) err.capability = capability;
        cb(toStatus(protos, err));
      } finally {
        release();
      }
    },
  });

  server.addService(protos.pkg.grpc.health.v1.Health.service, {
    Check(call, cb) {
      if (call.request.service === '' || call.request.service === 'plugin') {
        return cb(null, { status: 'SERVING' });
      }
      cb({ code: grpc.status.NOT_FOUND, details: `unknown service ${call.request.service}` });
    },
  });

  server.addService(protos.pkg.plugin.GRPCController.service, {
    Shutdown(_call, cb) {
      log.info('stopping: the host asked the plugin to');
      cb(null, {});
      setImmediate(stop);
    },
  });

  server.addService(protos.pkg.plugin.GRPCBroker.service, {
    StartStream(stream) {
      broker.startStream(stream);
    },
  });

  const socketPath = path.join(os.tmpdir(), `plugin-${process.pid}-${crypto.randomBytes(6).toString('hex')}`);
  const creds = grpc.ServerCredentials.createSsl(tls.hostCert, [{ cert_chain: tls.cert, private_key: tls.key }], true);
  server.bindAsync(`unix:${socketPath}`, creds, (err) => {
    if (err) {
      log.error('cannot listen', { error: String(err) });
      process.exit(1);
    }
    process.stdout.write(handshakeLine(socketPath, tls.cert));
  });

  // The host decides when the plugin stops; a terminal's Ctrl-C is not it.
  process.on('SIGINT', () => {});
  // Once the host is gone, stderr is a pipe nobody reads: a log line fails
  // with EPIPE, which must not end the process before the parent watch
  // does, with the shutdown hook.
  process.stderr.on('error', () => {});
  process.on('exit', () => fs.rmSync(socketPath, { force: true }));
  watchParent(log, () => p.shutdown && p.shutdown());
}

module.exports = { serve, WopError };
