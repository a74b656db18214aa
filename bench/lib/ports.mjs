// The ephemeral port range for a bench that opens tens of thousands of short connections (bench/setup.mjs,
// bench/daemon-ab.mjs): each leaves a socket in TIME_WAIT for a minute, so the default range (32768-60999) runs
// out. As root the range is widened for the run and restored at exit; otherwise the caller paces itself.
import { readFileSync, writeFileSync } from 'node:fs';

/** `widenPorts()` returns the range in force for the run (null: unreadable); `restorePorts()` puts it back. */
export function portsWidener(log, widen = true) {
  const PORT_RANGE = '/proc/sys/net/ipv4/ip_local_port_range';
  const WIDE = [1024, 65535];
  let restoreRange = null;

  /** Widens the ephemeral port range for the run when allowed (restored by restorePorts); else says the caller paces. */
  function widenPorts() {
    let before;
    try {
      before = readFileSync(PORT_RANGE, 'utf8').trim().split(/\s+/).map(Number);
    } catch {
      log('ports: cannot read the ephemeral range; pacing on TIME_WAIT instead');
      return null;
    }
    if (before[0] <= WIDE[0] && before[1] >= WIDE[1]) return before;
    if (!widen) {
      log(`ports: ephemeral range ${before.join('-')} left as it is (--no-widen); pacing on TIME_WAIT instead`);
      return before;
    }
    try {
      writeFileSync(PORT_RANGE, `${WIDE[0]} ${WIDE[1]}`);
      restoreRange = before;
      log(
        `ports: ephemeral range widened ${before.join('-')} -> ${WIDE.join('-')} for this run (restored at exit); for a minute after it, a port below ${before[0]} that one of its connections used cannot be listened on (TIME_WAIT): a daemon started then on 8080, 3128 or 1080 may fail with "address in use"`,
      );
      return WIDE;
    } catch {
      log(`ports: ephemeral range ${before.join('-')} (not widened: not allowed); pacing on TIME_WAIT instead`);
      return before;
    }
  }

  function restorePorts() {
    if (!restoreRange) return;
    try {
      writeFileSync(PORT_RANGE, restoreRange.join(' '));
      log(`ports: ephemeral range restored to ${restoreRange.join('-')}`);
    } catch (e) {
      log(`ports: could not restore the ephemeral range to ${restoreRange.join('-')}: ${e.message}`);
    }
    restoreRange = null;
  }

  return { widenPorts, restorePorts };
}
