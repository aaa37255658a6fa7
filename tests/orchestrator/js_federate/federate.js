// A coopsim federate written in Node.js: it serves coopsim.federate.v1.FederateHost on loopback, commands the
// robots the scenario gives it along a speed profile and publishes what it saw of them.
//
//   node federate.js PROTO_FILE [PORT]        (PORT 0 or absent: any free port; prints "listening on port N")
//
// The orchestrator connects to it like to any coopsim host (scenario: `remote: 127.0.0.1:PORT`). Only the .proto
// is shared: @grpc/proto-loader reads it at run time, nothing is generated.
'use strict';

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [protoFile, portArg = '0'] = process.argv.slice(2);
const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(protoFile, {
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
})).coopsim.federate.v1;

// ---- arrays: typed little-endian buffers ----------------------------------------------------------------------
const SIZES = { DTYPE_FLOAT64: 8, DTYPE_INT64: 8 }; // the dtypes this federate reads
const ITEM_BYTES = { DTYPE_FLOAT64: 8, DTYPE_FLOAT32: 4, DTYPE_INT64: 8, DTYPE_INT32: 4, DTYPE_INT16: 2,
  DTYPE_INT8: 1, DTYPE_UINT64: 8, DTYPE_UINT32: 4, DTYPE_UINT16: 2, DTYPE_UINT8: 1, DTYPE_BOOL: 1 };

function readNumbers(dtype, bytes, offset, count) {
  if (!SIZES[dtype]) throw new TypeError(`dtype ${dtype} is not read by this federate`);
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * 8);
  const out = [];
  for (let i = 0; i < count; i++) {
    out.push(dtype === 'DTYPE_FLOAT64' ? view.getFloat64(i * 8, true) : Number(view.getBigInt64(i * 8, true)));
  }
  return out;
}

const readArray = (array) => readNumbers(array.dtype, array.data, 0, array.data.length / ITEM_BYTES[array.dtype]);

function readPort(value) { // PortValue -> {column: numbers}: packed columns (8-aligned) first, then fields
  const out = {};
  const packed = value.columns;
  let offset = 0;
  if (packed) {
    packed.names.forEach((name, k) => {
      const count = Number(packed.lengths[k]);
      if (SIZES[packed.dtypes[k]]) out[name] = readNumbers(packed.dtypes[k], packed.data, offset, count);
      offset += Math.ceil((count * ITEM_BYTES[packed.dtypes[k]]) / 8) * 8; // each column starts 8-aligned
    });
  }
  for (const field of value.fields) if (field.value.kind === 'array') out[field.name] = readArray(field.value.array);
  return out;
}

function float64(values) {
  const data = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => data.writeDoubleLE(v, i * 8));
  return { array: { dtype: 'DTYPE_FLOAT64', shape: [values.length], data } };
}

function int64(values) {
  const data = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => data.writeBigInt64LE(BigInt(v), i * 8));
  return { array: { dtype: 'DTYPE_INT64', shape: [values.length], data } };
}

function port(columns) { // {name: Value} -> PortValue, in order
  return { fields: Object.entries(columns).map(([name, value]) => ({ name, value })) };
}

// ---- parameters and robot configurations: Value trees -----------------------------------------------------
function plain(value) {
  switch (value.kind) {
    case 'map': return Object.fromEntries(value.map.entries.map((e) => [e.key, plain(e.value)]));
    case 'list': return value.list.items.map(plain);
    case 'array': return readArray(value.array);
    case 'null': case undefined: return null;
    default: return value[value.kind];
  }
}

const fieldSpec = (name, dtype, unit) => ({ name, dtype, unit, finite: false, categories: [] });

// ---- the federate -------------------------------------------------------------------------------------------
class SpeedProfileFederate {
  setup(setup) {
    const params = plain({ kind: 'map', map: setup.params });
    this.name = setup.name;
    this.periodNs = Math.round((params.period_s ?? 0.05) * 1e9);
    this.profile = params.profile ?? [[0, 1.0]]; // [t_s, speed_mps] steps, in time order
    this.robots = [];
    const commands = `commands_${this.name}`;
    return {
      inputs: [{ port: 'state', fields: [fieldSpec('v', 'float64', 'm/s')] }],
      outputs: [
        { name: commands, index: 'event', typed: true, doc: 'speed commands from Node.js',
          fields: [fieldSpec('robot', 'int64', 'robot id'), fieldSpec('speed', 'float64', 'm/s'),
            fieldSpec('accel', 'float64', 'm/s^2'), fieldSpec('steer', 'float64', 'rad'),
            fieldSpec('yaw_rate', 'float64', 'rad/s')] },
        { name: 'js_view', index: 'event', typed: true, doc: 'the speeds the Node.js federate saw',
          fields: [fieldSpec('t_ns', 'int64', 'ns'), fieldSpec('robot', 'int64', 'robot id'),
            fieldSpec('v', 'float64', 'm/s')] },
      ],
      period_ns: this.periodNs,
    };
  }

  spawn(robots) { // the robots whose command source the scenario made this federate
    for (const robot of robots) {
      const config = plain({ kind: 'map', map: robot.config });
      if (config.command_source && config.command_source.federate === this.name) this.robots.push(robot.id);
    }
  }

  despawn(ids) { this.robots = this.robots.filter((id) => !ids.includes(id)); }

  speedAt(tS) {
    let speed = this.profile[0][1];
    for (const [from, value] of this.profile) if (tS >= from) speed = value;
    return speed;
  }

  step(tNs, inputs) {
    const state = inputs.find((i) => i.port === 'state');
    const columns = readPort(state.values[0]);
    const seen = this.robots.map((id) => columns.v[columns.id.indexOf(id)]);
    const n = this.robots.length;
    const nan = new Array(n).fill(NaN);
    return [
      { port: `commands_${this.name}`, value: port({ robot: int64(this.robots),
        speed: float64(new Array(n).fill(this.speedAt(tNs / 1e9))), accel: float64(nan), steer: float64(nan),
        yaw_rate: float64(new Array(n).fill(0)) }) },
      { port: 'js_view', value: port({ t_ns: int64(new Array(n).fill(tNs)), robot: int64(this.robots),
        v: float64(seen) }) },
    ];
  }
}

// ---- one session per stream: every request gets one reply, in order ---------------------------------------
function session(call) {
  const token = process.env.COOPSIM_TOKEN;
  if (token && call.metadata.get('authorization')[0] !== `Bearer ${token}`) {
    call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'wrong or missing token' });
    return;
  }
  const federate = new SpeedProfileFederate();
  call.on('data', (request) => {
    let reply;
    try {
      switch (request.call) {
        case 'hello':
          reply = { welcome: { protocol_version: 1, capabilities: [], host: 'node js_federate' } };
          break;
        case 'setup': reply = { meta: federate.setup(request.setup) }; break;
        case 'spawn': federate.spawn(request.spawn.robots); reply = { done: {} }; break;
        case 'despawn': federate.despawn(request.despawn.robot_ids); reply = { done: {} }; break;
        case 'step':
          reply = { outputs: { outputs: federate.step(request.step.t_ns, request.step.inputs) } };
          break;
        case 'next_time': reply = { next_time: {} }; break; // stepped by its period, no events
        case 'finalize': reply = { done: {} }; break;
        default: throw new Error(`unknown call '${request.call}'`);
      }
    } catch (err) {
      reply = { error: { type: err.name, message: err.message } };
    }
    call.write(reply);
  });
  call.on('end', () => call.end());
}

const server = new grpc.Server();
server.addService(pkg.FederateHost.service, { Session: session });
server.bindAsync(`127.0.0.1:${portArg}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  console.log(`js federate listening on port ${port}`);
});
process.on('SIGTERM', () => {
  server.forceShutdown();
  process.exit(0);
});
