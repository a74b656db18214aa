// Versioned PostgreSQL schema: index i is version i+1 in proxyd_schema. Never edit a shipped migration; append.
// Claims, releases and rate hits are functions so each is one round trip and one transaction.

/**
 * Migration 3's batch procedure: `step` (an item's function call, item index `i`) for every element of the
 * JSON array `items`, each in its own transaction committed without a flush wait; a lost lock race is that
 * item's `busy`; then, if any item answered `wrote`, one synchronous commit of a WAL record flushes them all.
 * Its text is part of a shipped migration: never change what it produces.
 */
function batchProcedure(name: string, params: string, items: string, step: string, wrote: string): string {
  return `CREATE PROCEDURE ${name}(p_account integer, ${params}, INOUT outcomes jsonb DEFAULT NULL)
  LANGUAGE plpgsql AS $$
  DECLARE
    r text;
    wrote boolean := false;
  BEGIN
    outcomes := '[]'::jsonb;
    FOR i IN 0 .. jsonb_array_length(${items}) - 1 LOOP
      PERFORM set_config('synchronous_commit', 'off', true);
      BEGIN
        r := ${step};
      EXCEPTION WHEN deadlock_detected OR lock_not_available OR serialization_failure THEN
        r := 'busy';
      END;
      wrote := wrote OR r = '${wrote}';
      outcomes := outcomes || to_jsonb(r);
      COMMIT;
    END LOOP;
    IF wrote THEN
      PERFORM pg_logical_emit_message(true, 'proxyd', 'batch');
      COMMIT;
    END IF;
  END $$;`;
}

/**
 * Migration 20's batch function: `step` for every element of `items` inside the caller's transaction (with the
 * request's audit record), each in a subtransaction: a lost lock race is that item's `busy` and undoes only it.
 * Part of a shipped migration: never change what it produces.
 */
function itemsFunction(name: string, params: string, items: string, step: string): string {
  return `CREATE FUNCTION ${name}(p_account integer, ${params}) RETURNS jsonb
  LANGUAGE plpgsql AS $$
  DECLARE
    r text;
    outcomes jsonb := '[]'::jsonb;
  BEGIN
    FOR i IN 0 .. jsonb_array_length(${items}) - 1 LOOP
      BEGIN
        r := ${step};
      EXCEPTION WHEN deadlock_detected OR lock_not_available OR serialization_failure THEN
        r := 'busy';
      END;
      outcomes := outcomes || to_jsonb(r);
    END LOOP;
    RETURN outcomes;
  END $$;`;
}

/**
 * The text of `proxyd_api_admit` (migrations 3 and 4): an API call's admission in one round trip, its page
 * built as `page` (jsonb in migration 3, json from 4). Part of shipped migrations: never change what it produces.
 */
function apiAdmitFunction(page: 'jsonb' | 'json'): string {
  return `CREATE FUNCTION proxyd_api_admit(p_bad_key text, p_bad_limit integer, p_access_key text, p_secret_hash bytea,
                                   p_rate_key text, p_rate_limit integer, p_window bigint, p_now bigint,
                                   p_list boolean, p_status smallint, p_ip text, p_limit integer, p_offset integer,
                                   OUT o_verdict text, OUT o_account integer, OUT o_oldest bigint, OUT o_page ${page}, OUT o_total integer)
  LANGUAGE plpgsql AS $$
  DECLARE
    n integer;
    t record;
    ok boolean;
    hit record;
  BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT count(*) INTO n FROM (SELECT 1 FROM rate_hits WHERE key = p_bad_key AND at_ms > p_now - p_window LIMIT p_bad_limit) s;
    IF n >= p_bad_limit THEN
      o_verdict := 'locked';
      SELECT min(at_ms) INTO o_oldest FROM rate_hits WHERE key = p_bad_key AND at_ms > p_now - p_window;
      RETURN;
    END IF;
    SELECT tk.account_id AS acct, tk.secret_hash AS secret_hash, tk.status AS tstatus, tk.expires_at AS expires_at, a.status AS astatus
      INTO t FROM api_tokens tk JOIN accounts a ON a.id = tk.account_id WHERE tk.access_key = p_access_key;
    ok := FOUND;
    IF ok THEN
      ok := t.secret_hash = p_secret_hash AND t.tstatus = 'active' AND t.astatus = 'active'
            AND (t.expires_at IS NULL OR t.expires_at > p_now / 1000);
    END IF;
    IF NOT ok THEN
      INSERT INTO rate_hits (key, at_ms) VALUES (p_bad_key, p_now);
      o_verdict := 'invalid';
      RETURN;
    END IF;
    SELECT * INTO hit FROM proxyd_rate_hit(p_rate_key, p_rate_limit, p_window, p_now);
    o_verdict := CASE WHEN hit.allowed THEN 'ok' ELSE 'limited' END;
    o_account := t.acct;
    o_oldest := hit.oldest;
    -- A list call also gets its page (newest first) and the total, as the list query alone would give them.
    IF hit.allowed AND p_list THEN
      SELECT coalesce(${page}_agg(${page}_build_array(e.id, e.ip, e.remark, e.status, e.created_at) ORDER BY e.created_at DESC, e.id DESC), '[]'::${page}), max(e.total)
        INTO o_page, o_total
        FROM (SELECT w.id, w.ip, w.remark, w.status, w.created_at, count(*) OVER () AS total FROM whitelist_entries w
               WHERE w.account_id = t.acct AND w.deleted_at IS NULL AND (p_status IS NULL OR w.status = p_status) AND (p_ip IS NULL OR w.ip = p_ip)
               ORDER BY w.created_at DESC, w.id DESC LIMIT p_limit OFFSET p_offset) e;
      IF o_total IS NULL THEN
        SELECT count(*) INTO o_total FROM whitelist_entries w
         WHERE w.account_id = t.acct AND w.deleted_at IS NULL AND (p_status IS NULL OR w.status = p_status) AND (p_ip IS NULL OR w.ip = p_ip);
      END IF;
    END IF;
  END $$;`;
}

export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id            integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    email         text NOT NULL,
    password_hash text NOT NULL,
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active','suspended','closed')),
    verified      boolean NOT NULL DEFAULT false,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL
  );
  -- Emails are unique case-insensitively, as in SQLite's COLLATE NOCASE.
  CREATE UNIQUE INDEX accounts_email ON accounts (lower(email));

  CREATE TABLE api_tokens (
    id          integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    account_id  integer NOT NULL REFERENCES accounts(id),
    access_key  text NOT NULL UNIQUE,
    secret_hash bytea NOT NULL,
    status      text NOT NULL CHECK (status IN ('active','disabled')),
    expires_at  bigint,
    created_at  bigint NOT NULL
  );
  CREATE INDEX api_tokens_account ON api_tokens(account_id, status);

  CREATE TABLE whitelist_entries (
    id            integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    account_id    integer NOT NULL REFERENCES accounts(id),
    ip            text NOT NULL,
    remark        text NOT NULL DEFAULT '',
    status        smallint NOT NULL DEFAULT 1 CHECK (status IN (1,2)),
    created_at    bigint NOT NULL,
    deleted_at    bigint,
    claim_version integer NOT NULL
  );
  CREATE UNIQUE INDEX whitelist_live_ip ON whitelist_entries(ip) WHERE deleted_at IS NULL;
  CREATE INDEX whitelist_account_newest ON whitelist_entries(account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

  -- Global ownership of an IP; the primary key is the unique constraint every racing claim meets.
  CREATE TABLE ip_claims (
    ip              text PRIMARY KEY,
    account_id      integer NOT NULL REFERENCES accounts(id),
    state           text NOT NULL CHECK (state IN ('held','releasing')),
    releasing_since bigint,
    version         integer NOT NULL
  );
  CREATE INDEX ip_claims_account ON ip_claims(account_id);

  CREATE TABLE proxy_users (
    id            integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    account_id    integer NOT NULL REFERENCES accounts(id),
    username      text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active','disabled')),
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL
  );
  CREATE INDEX proxy_users_account ON proxy_users(account_id);

  -- Unlogged: no WAL, so a hit costs no disk flush; a server crash empties it (windows start afresh).
  CREATE UNLOGGED TABLE rate_hits (
    key   text NOT NULL,
    at_ms bigint NOT NULL
  );
  CREATE INDEX rate_hits_key ON rate_hits(key, at_ms);
  CREATE INDEX rate_hits_at ON rate_hits(at_ms);

  CREATE TABLE traffic (
    account_id  integer PRIMARY KEY REFERENCES accounts(id),
    bytes_up    bigint NOT NULL DEFAULT 0,
    bytes_down  bigint NOT NULL DEFAULT 0,
    connections bigint NOT NULL DEFAULT 0,
    updated_at  bigint NOT NULL
  );

  CREATE TABLE console_sessions (
    sid        text PRIMARY KEY,
    account_id integer REFERENCES accounts(id),
    data       text NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX console_sessions_account ON console_sessions(account_id);

  -- Secrets every node of the fleet shares (the console's cookie key), created by whichever node is first.
  CREATE TABLE fleet_secrets (
    name  text PRIMARY KEY,
    value text NOT NULL
  );

  -- One item of an add: claim the IP (insert, or take over a released claim under its row lock) and record the entry.
  CREATE FUNCTION proxyd_claim_ip(p_account integer, p_ip text, p_remark text, p_now bigint, p_grace bigint, p_entry_id integer) RETURNS text
  LANGUAGE plpgsql AS $$
  DECLARE
    c ip_claims%ROWTYPE;
    v integer;
  BEGIN
    LOOP
      INSERT INTO ip_claims (ip, account_id, state, releasing_since, version) VALUES (p_ip, p_account, 'held', NULL, 1)
        ON CONFLICT (ip) DO NOTHING;
      IF FOUND THEN
        v := 1;
        EXIT;
      END IF;
      SELECT * INTO c FROM ip_claims WHERE ip = p_ip FOR UPDATE;
      CONTINUE WHEN NOT FOUND; -- released between the two statements: insert again
      IF c.state = 'held' THEN
        RETURN CASE WHEN c.account_id = p_account THEN 'already_listed' ELSE 'unavailable' END;
      END IF;
      IF p_now < coalesce(c.releasing_since, 0) + p_grace THEN
        RETURN 'unavailable';
      END IF;
      UPDATE ip_claims SET account_id = p_account, state = 'held', releasing_since = NULL, version = version + 1 WHERE ip = p_ip;
      v := c.version + 1;
      EXIT;
    END LOOP;
    -- p_entry_id: reserved by the caller so a concurrently claimed batch lists in item order.
    INSERT INTO whitelist_entries (id, account_id, ip, remark, status, created_at, deleted_at, claim_version)
      VALUES (coalesce(p_entry_id, nextval(pg_get_serial_sequence('whitelist_entries', 'id'))), p_account, p_ip, p_remark, 1, p_now, NULL, v);
    RETURN 'added';
  END $$;

  CREATE FUNCTION proxyd_release_ip(p_account integer, p_ip text, p_now bigint) RETURNS text
  LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE whitelist_entries SET deleted_at = p_now WHERE account_id = p_account AND ip = p_ip AND deleted_at IS NULL;
    IF NOT FOUND THEN
      RETURN 'absent';
    END IF;
    DELETE FROM ip_claims WHERE ip = p_ip AND account_id = p_account;
    RETURN 'deleted';
  END $$;

  -- Sliding-window log, exact across processes: hits of one key are serialised by an advisory lock.
  -- Counting stops at the limit, so a check costs O(limit).
  CREATE FUNCTION proxyd_rate_hit(p_key text, p_limit integer, p_window bigint, p_now bigint,
                                  OUT allowed boolean, OUT n integer, OUT oldest bigint)
  LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(hashtextextended('proxyd_rate:' || p_key, 0));
    SELECT count(*) INTO n FROM (SELECT 1 FROM rate_hits WHERE key = p_key AND at_ms > p_now - p_window LIMIT p_limit) s;
    allowed := n < p_limit;
    IF allowed THEN
      INSERT INTO rate_hits (key, at_ms) VALUES (p_key, p_now);
      n := n + 1;
    END IF;
    SELECT min(at_ms) INTO oldest FROM rate_hits WHERE key = p_key AND at_ms > p_now - p_window;
  END $$;
  `,
  // 2: the change log every node's admission view follows (docs/operations.md, fleet). Row triggers write one
  // row per changed admission key in the changing transaction; a statement trigger wakes LISTENing nodes
  // (NOTIFY is delivered at commit). A row names what changed, not the new state: readers re-read the key.
  `
  CREATE TABLE change_log (
    seq  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('user','ip','account')),
    key  text NOT NULL,
    at   bigint NOT NULL DEFAULT extract(epoch FROM now())::bigint
  );
  -- Rows up to trimmed_through are gone: a reader whose sequence is below it must reload in full.
  CREATE TABLE change_log_horizon (
    id              integer PRIMARY KEY CHECK (id = 1),
    trimmed_through bigint NOT NULL
  );
  INSERT INTO change_log_horizon (id, trimmed_through) VALUES (1, 0);

  CREATE FUNCTION proxyd_log_key() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    kind text := TG_ARGV[0];
    col  text := TG_ARGV[1];
    new_key text;
    old_key text;
  BEGIN
    IF TG_OP <> 'DELETE' THEN new_key := to_jsonb(NEW) ->> col; END IF;
    IF TG_OP <> 'INSERT' THEN old_key := to_jsonb(OLD) ->> col; END IF;
    IF new_key IS NOT NULL THEN INSERT INTO change_log (kind, key) VALUES (kind, new_key); END IF;
    IF old_key IS NOT NULL AND old_key IS DISTINCT FROM new_key THEN INSERT INTO change_log (kind, key) VALUES (kind, old_key); END IF;
    RETURN NULL;
  END $$;

  CREATE FUNCTION proxyd_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('proxyd_changes', '');
    RETURN NULL;
  END $$;

  CREATE TRIGGER change_log_proxy_users AFTER INSERT OR DELETE OR UPDATE OF username, password_hash, status, account_id ON proxy_users
    FOR EACH ROW EXECUTE FUNCTION proxyd_log_key('user', 'username');
  CREATE TRIGGER change_log_whitelist AFTER INSERT OR DELETE OR UPDATE OF ip, account_id, status, deleted_at ON whitelist_entries
    FOR EACH ROW EXECUTE FUNCTION proxyd_log_key('ip', 'ip');
  -- Admission by IP needs the held claim as well as the live entry (start-up repair changes claims alone).
  CREATE TRIGGER change_log_claims AFTER INSERT OR DELETE OR UPDATE OF ip, account_id, state ON ip_claims
    FOR EACH ROW EXECUTE FUNCTION proxyd_log_key('ip', 'ip');
  CREATE TRIGGER change_log_accounts AFTER INSERT OR DELETE OR UPDATE OF status ON accounts
    FOR EACH ROW EXECUTE FUNCTION proxyd_log_key('account', 'id');

  CREATE TRIGGER change_notify_proxy_users AFTER INSERT OR UPDATE OR DELETE ON proxy_users FOR EACH STATEMENT EXECUTE FUNCTION proxyd_notify_change();
  CREATE TRIGGER change_notify_whitelist AFTER INSERT OR UPDATE OR DELETE ON whitelist_entries FOR EACH STATEMENT EXECUTE FUNCTION proxyd_notify_change();
  CREATE TRIGGER change_notify_claims AFTER INSERT OR UPDATE OR DELETE ON ip_claims FOR EACH STATEMENT EXECUTE FUNCTION proxyd_notify_change();
  CREATE TRIGGER change_notify_accounts AFTER INSERT OR UPDATE OF status OR DELETE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION proxyd_notify_change();
  `,
  // 3: batches and API admission in one round trip each (docs/decisions.md#d-014, "PostgreSQL: a batch is one call").
  // A batch is a procedure: every item is its own transaction (COMMIT per item, docs/api.md) committed without
  // waiting for its WAL flush, and one synchronous commit at the end flushes them all before the caller hears
  // back. A WAL record is needed for that commit to flush: a transactional logical message (no table, no row).
  `
  ${batchProcedure(
    'proxyd_claim_batch',
    'p_items jsonb, p_now bigint, p_grace bigint',
    'p_items',
    'proxyd_claim_ip(p_account, p_items -> i ->> 0, p_items -> i ->> 1, p_now, p_grace, NULL)',
    'added',
  )}

  ${batchProcedure('proxyd_release_batch', 'p_ips jsonb, p_now bigint', 'p_ips', 'proxyd_release_ip(p_account, p_ips ->> i, p_now)', 'deleted')}

  -- An API call's admission (docs/api.md Authentication, Limits) in one round trip: the source IP's lock-out
  -- first, then the token; a failed token records an invalid-token hit, a good one takes its per-route hit.
  -- The secret arrives as its SHA-256; comparing two digests leaks nothing an attacker can steer.
  ${apiAdmitFunction('jsonb')}
  `,
  // 4: a list's page is built as json, not jsonb (docs/benchmarks/api.md, API on PostgreSQL): jsonb_agg builds a
  // binary document that is then printed again as text for the wire; json_agg writes the text once. Same
  // answers (postgres.js parses both); a node still on migration 3's code reads the json page alike.
  `
  DROP FUNCTION proxyd_api_admit(text, integer, text, bytea, text, integer, bigint, bigint, boolean, smallint, text, integer, integer);
  ${apiAdmitFunction('json')}
  `,
  // 5: the connection log, as SQLite's migration 4. bigint ids: a busy fleet writes billions; bigint
  // durations: a tunnel may stay open for weeks.
  `
  CREATE TABLE connection_log (
    id          bigserial PRIMARY KEY,
    started_ms  bigint NOT NULL,
    node        text NOT NULL,
    request_id  text NOT NULL,
    protocol    text NOT NULL,
    source_ip   text NOT NULL,
    username    text,
    account_id  integer,
    target      text,
    reason      text,
    bytes_up    bigint NOT NULL,
    bytes_down  bigint NOT NULL,
    duration_ms bigint NOT NULL
  );
  CREATE INDEX connection_log_started ON connection_log(started_ms);
  CREATE INDEX connection_log_account ON connection_log(account_id, id);
  -- Unique: a batch sent again after a timeout (the first attempt may still commit) adds nothing.
  CREATE UNIQUE INDEX connection_log_request ON connection_log(request_id);
  `,
  // 6: usage metering, as SQLite's migration 5.
  `
  CREATE TABLE usage_buckets (
    account_id  integer NOT NULL,
    period      text NOT NULL CHECK (period IN ('minute','hour','day')),
    start_ms    bigint NOT NULL,
    subject     text NOT NULL,
    node        text NOT NULL,
    bytes_up    bigint NOT NULL DEFAULT 0,
    bytes_down  bigint NOT NULL DEFAULT 0,
    connections bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, period, start_ms, subject, node)
  );
  CREATE INDEX usage_buckets_age ON usage_buckets(period, start_ms);
  CREATE TABLE usage_flushes (
    flush_id text PRIMARY KEY,
    at_ms    bigint NOT NULL
  );
  CREATE INDEX usage_flushes_age ON usage_flushes(at_ms);
  `,
  // 7: plans and limits, as SQLite's migration 6.
  `
  CREATE TABLE plans (
    account_id      integer PRIMARY KEY,
    traffic_limit   bigint,
    period          text NOT NULL DEFAULT 'month' CHECK (period IN ('day','month','lifetime')),
    anchor_day      integer NOT NULL DEFAULT 1 CHECK (anchor_day BETWEEN 1 AND 28),
    max_connections integer,
    expires_at_ms   bigint,
    updated_at      bigint NOT NULL
  );
  CREATE TABLE user_limits (
    proxy_user_id   integer PRIMARY KEY REFERENCES proxy_users(id) ON DELETE CASCADE,
    traffic_limit   bigint,
    max_connections integer
  );
  `,
  // 8: connection slots leased per node, as SQLite's migration 7.
  `
  CREATE TABLE slot_leases (
    key           text NOT NULL,
    node          text NOT NULL,
    slots         integer NOT NULL,
    expires_at_ms bigint NOT NULL,
    PRIMARY KEY (key, node)
  );
  `,
  // 9: the plan tables' change counter, as SQLite's migration 8 (statement-level triggers).
  `
  CREATE TABLE plan_version (
    id  integer PRIMARY KEY CHECK (id = 1),
    seq bigint NOT NULL
  );
  INSERT INTO plan_version (id, seq) VALUES (1, 0);
  CREATE FUNCTION proxyd_plan_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE plan_version SET seq = seq + 1 WHERE id = 1;
    RETURN NULL;
  END $$;
  CREATE TRIGGER plan_version_plans AFTER INSERT OR UPDATE OR DELETE ON plans FOR EACH STATEMENT EXECUTE FUNCTION proxyd_plan_version_bump();
  CREATE TRIGGER plan_version_user_limits AFTER INSERT OR UPDATE OR DELETE ON user_limits FOR EACH STATEMENT EXECUTE FUNCTION proxyd_plan_version_bump();
  CREATE TRIGGER plan_version_user_rename AFTER UPDATE OF username ON proxy_users FOR EACH STATEMENT EXECUTE FUNCTION proxyd_plan_version_bump();
  `,
  // 10: exit nodes: each registers its hop address and location and heartbeats every second;
  // entries read the rows the database saw lately.
  `
  CREATE TABLE exit_nodes (
    node         text PRIMARY KEY,
    hop          text NOT NULL,
    country      text,
    city         text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
  );
  `,
  // 11: an entry node's records name the exit, and the exit a moved session had before.
  `
  ALTER TABLE connection_log ADD COLUMN exit text;
  ALTER TABLE connection_log ADD COLUMN exit_moved_from text;
  `,
  // 12: the hop over TLS: each exit registers its certificates' fingerprints (entries pin them) and can be
  // asked for a new certificate; the hop secret keeps the one it replaced, for the rotation's grace.
  `
  ALTER TABLE exit_nodes ADD COLUMN fingerprints text NOT NULL DEFAULT '';
  ALTER TABLE exit_nodes ADD COLUMN rotate_cert_at timestamptz;
  ALTER TABLE fleet_secrets ADD COLUMN previous text;
  ALTER TABLE fleet_secrets ADD COLUMN rotated_at timestamptz;
  `,
  // 13: usage per registrable domain, as SQLite's migration 10.
  `
  CREATE TABLE usage_domains (
    account_id  integer NOT NULL,
    day_ms      bigint NOT NULL,
    subject     text NOT NULL,
    node        text NOT NULL,
    domain      text NOT NULL,
    bytes_up    bigint NOT NULL DEFAULT 0,
    bytes_down  bigint NOT NULL DEFAULT 0,
    connections bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day_ms, subject, node, domain)
  );
  CREATE INDEX usage_domains_age ON usage_domains(day_ms);
  `,
  // 14: webhooks, as SQLite's migration 11.
  `
  CREATE TABLE webhooks (
    account_id integer PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    url        text NOT NULL,
    thresholds text NOT NULL,
    secret     text NOT NULL
  );
  CREATE TABLE webhook_events (
    id               text PRIMARY KEY,
    account_id       integer NOT NULL,
    type             text NOT NULL,
    once_key         text NOT NULL,
    body             text NOT NULL,
    state            text NOT NULL DEFAULT 'pending',
    attempts         integer NOT NULL DEFAULT 0,
    last_status      integer,
    next_at_ms       bigint NOT NULL,
    created_at_ms    bigint NOT NULL,
    claimed_by       text,
    claimed_until_ms bigint,
    UNIQUE (account_id, once_key)
  );
  CREATE INDEX webhook_events_due ON webhook_events(state, next_at_ms);
  `,
  // 15: the connection log in daily partitions (UTC days of started_ms): retention and the size cap drop whole
  // days in constant time instead of deleting row by row. Rows already there move into their days' partitions.
  // A unique index of a partitioned table must hold the partition key: a batch sent again carries the same
  // (request_id, started_ms), so it still adds nothing.
  `
  ALTER TABLE connection_log RENAME TO connection_log_unpartitioned;
  ALTER INDEX connection_log_started RENAME TO connection_log_unpartitioned_started;
  ALTER INDEX connection_log_account RENAME TO connection_log_unpartitioned_account;
  ALTER INDEX connection_log_request RENAME TO connection_log_unpartitioned_request;
  ALTER INDEX connection_log_pkey RENAME TO connection_log_unpartitioned_pkey;
  ALTER TABLE connection_log_unpartitioned ALTER COLUMN id DROP DEFAULT;
  ALTER SEQUENCE connection_log_id_seq OWNED BY NONE;
  CREATE TABLE connection_log (
    id              bigint NOT NULL DEFAULT nextval('connection_log_id_seq'),
    started_ms      bigint NOT NULL,
    node            text NOT NULL,
    request_id      text NOT NULL,
    protocol        text NOT NULL,
    source_ip       text NOT NULL,
    username        text,
    account_id      integer,
    target          text,
    reason          text,
    bytes_up        bigint NOT NULL,
    bytes_down      bigint NOT NULL,
    duration_ms     bigint NOT NULL,
    exit            text,
    exit_moved_from text
  ) PARTITION BY RANGE (started_ms);
  ALTER SEQUENCE connection_log_id_seq OWNED BY connection_log.id;
  CREATE INDEX connection_log_started ON connection_log(started_ms);
  CREATE INDEX connection_log_account ON connection_log(account_id, id);
  CREATE INDEX connection_log_id ON connection_log(id);
  CREATE UNIQUE INDEX connection_log_request ON connection_log(request_id, started_ms);
  -- The partition of the UTC day holding p_ms, made if it is not there (by whichever node asks first).
  CREATE FUNCTION proxyd_connection_log_day(p_ms bigint) RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    d bigint := (p_ms / 86400000) * 86400000;
    part text := 'connection_log_' || to_char(to_timestamp(d / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD');
  BEGIN
    IF to_regclass(part) IS NOT NULL THEN RETURN; END IF;
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF connection_log FOR VALUES FROM (%s) TO (%s)', part, d, d + 86400000);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    NULL; -- another node made it at the same moment
  END $$;
  DO $$
  DECLARE r record;
  BEGIN
    FOR r IN SELECT DISTINCT (started_ms / 86400000) * 86400000 AS d FROM connection_log_unpartitioned LOOP
      PERFORM proxyd_connection_log_day(r.d);
    END LOOP;
    PERFORM proxyd_connection_log_day((extract(epoch FROM now()) * 1000)::bigint);
  END $$;
  INSERT INTO connection_log (id, started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms, exit, exit_moved_from)
    SELECT id, started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms, exit, exit_moved_from
    FROM connection_log_unpartitioned;
  DROP TABLE connection_log_unpartitioned;
  `,
  // 16: a SOCKS5 UDP association's record counts its datagrams each way (null on every other record).
  `
  ALTER TABLE connection_log ADD COLUMN datagrams_up bigint;
  ALTER TABLE connection_log ADD COLUMN datagrams_down bigint;
  `,
  // 17: target rules, as SQLite's migration 13 (account_id 0: the service's), logged as their account's change.
  `
  CREATE TABLE target_rules (
    account_id integer PRIMARY KEY,
    deny       text NOT NULL DEFAULT '',
    allow      text NOT NULL DEFAULT '',
    updated_at bigint NOT NULL
  );
  CREATE TRIGGER change_log_target_rules AFTER INSERT OR DELETE OR UPDATE ON target_rules
    FOR EACH ROW EXECUTE FUNCTION proxyd_log_key('account', 'account_id');
  CREATE TRIGGER change_notify_target_rules AFTER INSERT OR UPDATE OR DELETE ON target_rules FOR EACH STATEMENT EXECUTE FUNCTION proxyd_notify_change();
  `,
  // 18: rate limits, as SQLite's migration 14 (the plan version's statement triggers already fire).
  `
  ALTER TABLE plans ADD COLUMN rate_limit bigint;
  ALTER TABLE user_limits ADD COLUMN rate_limit bigint;
  `,
  // 19: usage writes grow with active users, not periods (docs/decisions.md#d-027, "Usage writes"): a flush writes
  // minute buckets only, adding its deltas to roll_* too (what the minute holds that its hour and day buckets do
  // not yet) and marking the row `unrolled`; a roll-up on one node at a time folds finished minutes into hour and
  // day buckets (node '') and clears both. Reads of hours and days add the unrolled minutes (this partial index
  // finds them). The flag, not roll_*, is indexed: a flush's update of a minute row changes no indexed column and
  // stays a heap-only (HOT) update, with room left on each page for it (fillfactor). Rows written before this
  // migration have all three periods already: not unrolled.
  `
  ALTER TABLE usage_buckets ADD COLUMN roll_up bigint NOT NULL DEFAULT 0,
    ADD COLUMN roll_down bigint NOT NULL DEFAULT 0,
    ADD COLUMN roll_conn bigint NOT NULL DEFAULT 0,
    ADD COLUMN unrolled boolean NOT NULL DEFAULT false;
  ALTER TABLE usage_buckets SET (fillfactor = 70);
  CREATE INDEX usage_buckets_unrolled ON usage_buckets(account_id, start_ms) WHERE period = 'minute' AND unrolled;
  `,
  // 20: account security, as SQLite's migration 16: the audit log and its chain heads, the second factor. A
  // whitelist batch that writes its record runs its items in one transaction with the record (no action without
  // its record), each item in a subtransaction: a failing item undoes nothing before it, a lost lock race is that
  // item's `busy`, as in migration 3's procedures.
  `
  CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    account_id  integer NOT NULL,
    seq         bigint NOT NULL,
    time_ms     bigint NOT NULL,
    actor_type  text NOT NULL,
    actor_id    text,
    source_ip   text,
    request_id  text,
    action      text NOT NULL,
    target      text,
    details     text NOT NULL,
    prev_hash   text NOT NULL,
    hash        text NOT NULL,
    once_key    text,
    UNIQUE (account_id, seq)
  );
  CREATE UNIQUE INDEX audit_log_once ON audit_log(account_id, once_key) WHERE once_key IS NOT NULL;
  CREATE INDEX audit_log_time ON audit_log(time_ms);
  CREATE TABLE audit_heads (
    account_id  integer PRIMARY KEY,
    seq         bigint NOT NULL,
    hash        text NOT NULL,
    anchor_seq  bigint NOT NULL,
    anchor_hash text NOT NULL
  );
  CREATE TABLE second_factors (
    account_id      integer PRIMARY KEY REFERENCES accounts(id),
    totp_secret     text,
    totp_enabled_ms bigint,
    totp_last_step  bigint NOT NULL DEFAULT 0,
    fail_times      text NOT NULL DEFAULT '',
    locked_until_ms bigint NOT NULL DEFAULT 0
  );
  CREATE TABLE recovery_codes (
    account_id integer NOT NULL REFERENCES accounts(id),
    code_hash  text NOT NULL,
    used_ms    bigint,
    PRIMARY KEY (account_id, code_hash)
  );
  CREATE TABLE passkeys (
    id            integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    account_id    integer NOT NULL REFERENCES accounts(id),
    credential_id text NOT NULL UNIQUE,
    public_key    bytea NOT NULL,
    counter       bigint NOT NULL,
    transports    text NOT NULL DEFAULT '',
    name          text NOT NULL,
    created_ms    bigint NOT NULL,
    last_used_ms  bigint
  );
  CREATE INDEX passkeys_account ON passkeys(account_id);

  ${itemsFunction('proxyd_claim_items', 'p_items jsonb, p_now bigint, p_grace bigint', 'p_items', 'proxyd_claim_ip(p_account, p_items -> i ->> 0, p_items -> i ->> 1, p_now, p_grace, NULL)')}

  ${itemsFunction('proxyd_release_items', 'p_ips jsonb, p_now bigint', 'p_ips', 'proxyd_release_ip(p_account, p_ips ->> i, p_now)')}
  `,
  // 21: API keys, as SQLite's migration 17. Read once per request by the public id (the primary key); a revocation
  // is a committed update every node reads on its next request.
  `
  CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    account_id   integer NOT NULL REFERENCES accounts(id),
    name         text NOT NULL,
    scopes       text NOT NULL,
    secret_hash  bytea NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint,
    allowed_ips  text NOT NULL DEFAULT '',
    revoked_at   bigint,
    last_used_at bigint,
    last_used_ip text
  );
  CREATE INDEX api_keys_account ON api_keys(account_id, created_at);

  -- A key's admission in one round trip, as the stepwise checks of api/key-auth.ts decide it: the source's
  -- lock-out, the key (hash, revoked, expired, account, allowed sources; a failure is one more hit on the lock-out),
  -- the scope (p_scope NULL: any), then the key's limit of its kind and the route's own (p_rate2_key NULL: none).
  CREATE FUNCTION proxyd_key_admit(p_bad_key text, p_bad_limit integer, p_key_id text, p_secret_hash bytea, p_source text,
                                   p_scope text, p_rate_key text, p_rate_limit integer, p_rate2_key text, p_rate2_limit integer,
                                   p_window bigint, p_now bigint,
                                   OUT o_verdict text, OUT o_account integer, OUT o_scopes text, OUT o_oldest bigint)
  LANGUAGE plpgsql AS $$
  DECLARE
    n integer;
    k record;
    ok boolean;
    hit record;
  BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT count(*) INTO n FROM (SELECT 1 FROM rate_hits WHERE key = p_bad_key AND at_ms > p_now - p_window LIMIT p_bad_limit) s;
    IF n >= p_bad_limit THEN
      o_verdict := 'locked';
      SELECT min(at_ms) INTO o_oldest FROM rate_hits WHERE key = p_bad_key AND at_ms > p_now - p_window;
      RETURN;
    END IF;
    SELECT ak.account_id AS acct, ak.secret_hash AS secret_hash, ak.scopes AS scopes, ak.expires_at AS expires_at,
           ak.revoked_at AS revoked_at, ak.allowed_ips AS allowed_ips, a.status AS astatus
      INTO k FROM api_keys ak JOIN accounts a ON a.id = ak.account_id WHERE ak.id = p_key_id;
    ok := FOUND;
    IF ok THEN
      ok := coalesce(k.secret_hash = p_secret_hash AND k.revoked_at IS NULL AND k.astatus = 'active'
            AND (k.expires_at IS NULL OR k.expires_at > p_now / 1000)
            AND (k.allowed_ips = '' OR p_source::inet <<= ANY (string_to_array(k.allowed_ips, ',')::inet[])), false);
    END IF;
    IF NOT ok THEN
      INSERT INTO rate_hits (key, at_ms) VALUES (p_bad_key, p_now);
      o_verdict := 'invalid';
      RETURN;
    END IF;
    o_account := k.acct;
    o_scopes := k.scopes;
    IF p_scope IS NOT NULL AND NOT (p_scope = ANY (string_to_array(k.scopes, ','))) THEN
      o_verdict := 'scope';
      RETURN;
    END IF;
    SELECT * INTO hit FROM proxyd_rate_hit(p_rate_key, p_rate_limit, p_window, p_now);
    IF hit.allowed AND p_rate2_key IS NOT NULL THEN
      SELECT * INTO hit FROM proxyd_rate_hit(p_rate2_key, p_rate2_limit, p_window, p_now);
    END IF;
    o_verdict := CASE WHEN hit.allowed THEN 'ok' ELSE 'limited' END;
    o_oldest := hit.oldest;
  END $$;
  `,
  // 22: the customer API, as SQLite's migration 18: a proxy user's own expiry and target rules beside its limits
  // (the plan version's statement trigger fires on them), and Idempotency-Key answers.
  `
  ALTER TABLE user_limits ADD COLUMN expires_at_ms bigint;
  ALTER TABLE user_limits ADD COLUMN allow text NOT NULL DEFAULT '';
  ALTER TABLE user_limits ADD COLUMN deny text NOT NULL DEFAULT '';
  CREATE TABLE idempotency_keys (
    account_id    integer NOT NULL,
    key           text NOT NULL,
    method        text NOT NULL,
    path          text NOT NULL,
    body_hash     text NOT NULL,
    status        integer,
    response      text,
    created_at_ms bigint NOT NULL,
    PRIMARY KEY (account_id, key)
  );
  CREATE INDEX idempotency_keys_age ON idempotency_keys(created_at_ms);
  `,
  // 23: dedicated egress addresses, as SQLite's migration 19 (a statement trigger bumps the version).
  `
  CREATE TABLE egress_addresses (
    address          text PRIMARY KEY,
    node             text NOT NULL,
    country          text,
    city             text,
    account_id       integer REFERENCES accounts(id),
    assigned_at      bigint,
    quarantine_until bigint,
    registered_at    bigint NOT NULL
  );
  CREATE INDEX egress_addresses_account ON egress_addresses(account_id) WHERE account_id IS NOT NULL;
  CREATE INDEX egress_addresses_node ON egress_addresses(node);
  CREATE TABLE egress_replacements (
    account_id bigint NOT NULL,
    month      text NOT NULL,
    count      integer NOT NULL,
    PRIMARY KEY (account_id, month)
  );
  CREATE TABLE egress_usage (
    account_id  integer NOT NULL,
    address     text NOT NULL,
    day_ms      bigint NOT NULL,
    bytes_up    bigint NOT NULL,
    bytes_down  bigint NOT NULL,
    connections bigint NOT NULL,
    PRIMARY KEY (account_id, day_ms, address)
  );
  CREATE TABLE egress_version (id integer PRIMARY KEY, seq bigint NOT NULL);
  INSERT INTO egress_version (id, seq) VALUES (1, 0);
  CREATE FUNCTION proxyd_egress_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE egress_version SET seq = seq + 1 WHERE id = 1;
    RETURN NULL;
  END $$;
  CREATE TRIGGER egress_version_addresses AFTER INSERT OR UPDATE OR DELETE ON egress_addresses FOR EACH STATEMENT EXECUTE FUNCTION proxyd_egress_version_bump();
  `,
  // 24: withdrawn addresses, as SQLite's migration 20.
  `
  ALTER TABLE egress_addresses ADD COLUMN withdrawn boolean NOT NULL DEFAULT false;
  `,
];
