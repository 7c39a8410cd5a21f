/**
 * FarmMetrics and its observers without a daemon: the infrastructure kind of a
 * record (h3's field, absent until that lands) is counted, a record that could
 * not be stored is not, a failed key press counts as an error, and the
 * optional event-stream and webhook series (wired by the lead) are valid too
 * (`promtool check metrics`).
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import type { ResultRecord } from '../../src/core/model.js';
import type { ResultRepository } from '../../src/core/ports.js';
import type { IrTransport } from '../../src/hardware/ir/transports/types.js';
import { FarmMetrics, observeIrTransport, observeResults, type MetricSources } from '../../src/metrics/index.js';
import { resultRecord } from '../fixtures/records.js';

const sources: MetricSources = {
  node: () => ({ online: true, available: false, reserved: false, running: true }),
  capture: () => ({ framesReceived: 42, frameAgeSecs: 0.1, restarts: 2, signal: 'frozen' }),
  resultsStored: () => 7,
  diskFreeBytes: async () => 123 * 2 ** 20,
};

const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

function promtoolCheck(text: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(text);
  });
}

describe('metrics (in-process)', () => {
  it('reads the sources at scrape time', async () => {
    const text = await new FarmMetrics({ version: '1.2.3', nodeId: 'n1', sources, irTransport: 'irtoy:/dev/ttyACM0' }).scrape();
    expect(value(text, 'farmhand_node_running')).to.equal(1);
    expect(value(text, 'farmhand_node_available')).to.equal(0);
    expect(value(text, 'farmhand_capture_frames_received_total')).to.equal(42);
    expect(value(text, 'farmhand_capture_restarts_total')).to.equal(2);
    expect(value(text, 'farmhand_capture_signal{state="frozen"}')).to.equal(1);
    expect(value(text, 'farmhand_capture_signal{state="ok"}')).to.equal(0);
    expect(value(text, 'farmhand_results_stored')).to.equal(7);
    expect(value(text, 'farmhand_data_dir_free_bytes')).to.equal(123 * 2 ** 20);
    expect(value(text, 'farmhand_key_presses_total{transport="irtoy",outcome="error"}')).to.equal(0);
    expect(value(text, 'farmhand_build_info{version="1.2.3",nodejs="' + process.versions.node + '"}')).to.equal(1);
  });

  it('counts a stored record by outcome and its infrastructure kind; a record that could not be stored is not counted', async () => {
    const m = new FarmMetrics({ version: '1', nodeId: 'n1', sources });
    let fail = false;
    const repo = {
      add: async () => {
        if (fail) throw new Error('ENOSPC');
      },
    } as unknown as ResultRepository;
    const observed = observeResults(repo, m);
    await observed.add({ ...resultRecord({ result: 'error', duration: 12 }), infrastructure_error: 'capture_lost' });
    await observed.add({ ...resultRecord({ result: 'error' }), infrastructure_error: 'some_new_kind' } as unknown as ResultRecord);
    fail = true;
    await observed.add(resultRecord({ result: 'pass' })).then(
      () => expect.fail('add should reject'),
      () => undefined,
    );
    const text = await m.scrape();
    expect(value(text, 'farmhand_test_runs_total{outcome="error"}')).to.equal(2);
    expect(value(text, 'farmhand_test_runs_total{outcome="pass"}')).to.equal(0);
    expect(value(text, 'farmhand_infrastructure_errors_total{kind="capture_lost"}')).to.equal(1);
    expect(value(text, 'farmhand_infrastructure_errors_total{kind="some_new_kind"}')).to.equal(1);
    expect(value(text, 'farmhand_infrastructure_errors_total{kind="disk_full"}')).to.equal(0);
    expect(value(text, 'farmhand_test_run_duration_seconds_sum{outcome="error"}')).to.be.at.least(12);
  });

  it('counts a key press that failed as an error and passes the failure on', async () => {
    const m = new FarmMetrics({ version: '1', nodeId: 'n1', sources, irTransport: 'lircd:/run/lirc/lircd' });
    const t: IrTransport = {
      uri: 'lircd:/run/lirc/lircd',
      send: async () => undefined,
      sendKey: async () => {
        throw new Error('lircd is gone');
      },
      close: async () => undefined,
    };
    const observed = observeIrTransport(t, m);
    await observed.send([]);
    await observed.sendKey!('tv', 'KEY_OK').then(
      () => expect.fail('sendKey should reject'),
      (e: Error) => expect(e.message).to.equal('lircd is gone'),
    );
    const text = await m.scrape();
    expect(value(text, 'farmhand_key_presses_total{transport="lircd",outcome="ok"}')).to.equal(1);
    expect(value(text, 'farmhand_key_presses_total{transport="lircd",outcome="error"}')).to.equal(1);
    expect(value(text, 'farmhand_key_press_duration_seconds_count{transport="lircd"}')).to.equal(1);
  });

  it('passes a transport\'s holds through (holdKey, holdTrains) and counts each as a press; a transport without them gets none', async () => {
    const m = new FarmMetrics({ version: '1', nodeId: 'n1', sources, irTransport: 'lircd:/run/lirc/lircd' });
    const held: string[] = [];
    const t: IrTransport = {
      uri: 'lircd:/run/lirc/lircd',
      send: async () => undefined,
      holdKey: async (remote, key, o) => {
        held.push(`${remote} ${key} ${o.maxMs}`);
      },
      holdTrains: async (trains, o) => {
        held.push(`${trains.length} ${o.key?.key}`);
      },
      close: async () => undefined,
    };
    const observed = observeIrTransport(t, m);
    await observed.holdKey!('tv', 'KEY_UP', { maxMs: 60_000 });
    await observed.holdTrains!([], { maxMs: 1, key: { remote: 'tv', key: 'KEY_OK' } });
    expect(held).to.deep.equal(['tv KEY_UP 60000', '0 KEY_OK']);
    expect(value(await m.scrape(), 'farmhand_key_presses_total{transport="lircd",outcome="ok"}')).to.equal(2);
    const plain = observeIrTransport({ uri: 'irtoy:/dev/ttyACM0', send: async () => undefined, close: async () => undefined }, m);
    expect('holdKey' in plain || 'holdTrains' in plain).to.equal(false);
  });

  it('with the event-stream and webhook sources wired, exports them too, and promtool accepts it all', async () => {
    const m = new FarmMetrics({
      version: '1',
      nodeId: 'n1',
      sources: { ...sources, eventClients: () => 3, webhookDeliveries: () => ({ delivered: 5 }) },
      webhookOutcomes: ['delivered', 'failed'],
    });
    m.recordHttp('GET', '/api/v1/jobs/:node/:hex/:num', 200, 0.004);
    const text = await m.scrape();
    expect(value(text, 'farmhand_event_stream_clients')).to.equal(3);
    expect(value(text, 'farmhand_webhook_deliveries_total{outcome="delivered"}')).to.equal(5);
    expect(value(text, 'farmhand_webhook_deliveries_total{outcome="failed"}')).to.equal(0);
    const check = await promtoolCheck(text);
    expect(check.code, check.out).to.equal(0);
  });
});
