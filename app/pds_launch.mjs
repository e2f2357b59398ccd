// Start a PLC directory (in memory) and an AT Protocol PDS on 127.0.0.1 for the
// console's demo and tests (SPEC PLAT-5), then print one JSON line when both are ready:
//
//   {"pds_url": "...", "plc_url": "...", "admin_password": "...",
//    "handle_domain": ".test", "data_dir": "..."}
//
// Usage: <Node 22> app/pds_launch.mjs <install folder printed by .ci/pds-install>
//
// Nothing leaves the machine: both servers listen on 127.0.0.1 only (free ports
// chosen by the kernel), the PDS resolves DIDs through our PLC, and it has no relay
// (crawlers), no email transport, no AppView, moderation or report service. Its data
// lives in a temporary folder removed at exit. It stops on SIGTERM/SIGINT and when
// its standard input closes (the parent died or let go), so it never outlives the
// test session.
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const HOST = '127.0.0.1'
const HANDLE_DOMAIN = '.test'
const STOP_GRACE_MS = 10_000

// Logs of both servers (off unless LOG_ENABLED=true) must never reach stdout, which
// carries only the ready line. Set before the packages read it at import.
process.env.LOG_DESTINATION ??= '/dev/stderr'

const home = process.argv[2] ?? process.env.PDS_HOME
if (!home) fail('usage: pds_launch.mjs <PDS install folder> (or set PDS_HOME)')
const requireFromHome = createRequire(join(home, 'package.json'))

const servers = []
let dataDir = null
let pds = null
let plcDb = null
let stopping = false

function fail(message) {
  process.stderr.write(`pds_launch.mjs: ${message}\n`)
  process.exit(1)
}

// An HTTP server bound to a free loopback port before the app that serves it
// exists, so the PDS can be configured with its own port without a race.
async function listenOnFreePort() {
  const server = createServer()
  server.listen(0, HOST)
  await once(server, 'listening')
  servers.push(server)
  return { server, port: server.address().port }
}

// The PDS signs PLC operations with a secp256k1 key given as 32 bytes of hex.
function newK256PrivateKeyHex() {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'secp256k1' })
  const jwk = privateKey.export({ format: 'jwk' })
  return Buffer.from(jwk.d, 'base64url').toString('hex')
}

async function startPlc(plcServer) {
  const { server, port } = await listenOnFreePort()
  plcDb = plcServer.Database.mock()
  const plc = plcServer.PlcServer.create({ db: plcDb, port })
  server.on('request', plc.app)
  return `http://${HOST}:${port}`
}

async function startPds(pdsPackage, plcUrl, adminPassword) {
  const { server, port } = await listenOnFreePort()
  dataDir = await mkdtemp(join(tmpdir(), 'console-pds-'))
  const env = {
    port,
    devMode: true, // the OAuth routes accept an http:// issuer only in dev mode
    hostname: 'localhost', // public URL http://localhost:<port>, handles under .test
    serviceHandleDomains: [HANDLE_DOMAIN],
    dataDirectory: dataDir,
    blobstoreDiskLocation: join(dataDir, 'blobs'),
    didPlcUrl: plcUrl,
    inviteRequired: false,
    crawlers: [],
    rateLimitsEnabled: false,
    adminPassword,
    jwtSecret: randomBytes(32).toString('hex'),
    dpopSecret: randomBytes(32).toString('hex'),
    plcRotationKeyK256PrivateKeyHex: newK256PrivateKeyHex(),
  }
  pds = await pdsPackage.PDS.create(pdsPackage.envToCfg(env), pdsPackage.envToSecrets(env))
  // What PDS.start() does, except its listen() on every interface: we serve the
  // app from our loopback-only server instead (PlcServer.start() likewise).
  await pds.ctx.sequencer.start()
  server.on('request', pds.app)
  return `http://${HOST}:${port}`
}

async function stop(code) {
  if (stopping) return
  stopping = true
  setTimeout(() => process.exit(code || 1), STOP_GRACE_MS).unref()
  try {
    await Promise.all(
      servers.map((server) => {
        const closed = once(server, 'close')
        server.close()
        server.closeAllConnections()
        return closed
      }),
    )
    await pds?.ctx.destroy()
    await plcDb?.close()
  } catch (err) {
    process.stderr.write(`pds_launch.mjs: while stopping: ${err?.stack ?? err}\n`)
    code = code || 1
  } finally {
    if (dataDir) await rm(dataDir, { recursive: true, force: true })
  }
  process.exit(code)
}

async function main() {
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => stop(0))
  process.stdin.on('end', () => stop(0))
  process.stdin.on('error', () => stop(0))
  process.stdin.resume()

  const pdsPackage = await import(pathToFileURL(requireFromHome.resolve('@atproto/pds')).href)
  const plcServer = requireFromHome('@did-plc/server')
  const adminPassword = randomBytes(24).toString('base64url')
  const plcUrl = await startPlc(plcServer)
  const pdsUrl = await startPds(pdsPackage, plcUrl, adminPassword)
  process.stdout.write(
    JSON.stringify({
      pds_url: pdsUrl,
      plc_url: plcUrl,
      admin_password: adminPassword,
      handle_domain: HANDLE_DOMAIN,
      data_dir: dataDir,
    }) + '\n',
  )
}

main().catch((err) => {
  process.stderr.write(`pds_launch.mjs: could not start: ${err?.stack ?? err}\n`)
  stop(1)
})
