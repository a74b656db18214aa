// Versioned schema: index i is user_version i+1. Never edit a shipped migration; append a new one.
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id            INTEGER PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','suspended','closed')),
    verified      INTEGER NOT NULL DEFAULT 0 CHECK (verified IN (0,1)),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
  );

  CREATE TABLE api_tokens (
    id          INTEGER PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts(id),
    access_key  TEXT NOT NULL UNIQUE,
    secret_hash BLOB NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active','disabled')),
    expires_at  INTEGER,
    created_at  INTEGER NOT NULL
  );
  CREATE INDEX api_tokens_account ON api_tokens(account_id, status);

  -- One row per whitelist entry; deleted_at marks a soft delete (never returned by the API).
  CREATE TABLE whitelist_entries (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts(id),
    ip            TEXT NOT NULL,
    remark        TEXT NOT NULL DEFAULT '',
    status        INTEGER NOT NULL DEFAULT 1 CHECK (status IN (1,2)),
    created_at    INTEGER NOT NULL,
    deleted_at    INTEGER,
    claim_version INTEGER NOT NULL
  );
  -- At most one live entry per IP across all accounts (the claim below is the owner of record).
  CREATE UNIQUE INDEX whitelist_live_ip ON whitelist_entries(ip) WHERE deleted_at IS NULL;
  CREATE INDEX whitelist_account_live ON whitelist_entries(account_id, id) WHERE deleted_at IS NULL;

  -- Global ownership of an IP: held by one account, or being released after that account closed.
  CREATE TABLE ip_claims (
    ip              TEXT PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts(id),
    state           TEXT NOT NULL CHECK (state IN ('held','releasing')),
    releasing_since INTEGER,
    version         INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX ip_claims_account ON ip_claims(account_id);

  CREATE TABLE proxy_users (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts(id),
    username      TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','disabled')),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
  );
  CREATE INDEX proxy_users_account ON proxy_users(account_id);

  -- Sliding-window rate-limit hits, used when several workers share the database.
  CREATE TABLE rate_hits (
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
  );
  CREATE INDEX rate_hits_key ON rate_hits(key, at_ms);

  CREATE TABLE traffic (
    account_id  INTEGER PRIMARY KEY REFERENCES accounts(id),
    bytes_up    INTEGER NOT NULL DEFAULT 0,
    bytes_down  INTEGER NOT NULL DEFAULT 0,
    connections INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
  );

  CREATE TABLE console_sessions (
    sid        TEXT PRIMARY KEY,
    account_id INTEGER REFERENCES accounts(id),
    data       TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX console_sessions_account ON console_sessions(account_id);
  `,
  // 2: list pages newest first straight from an index (no sort of every entry of a large account).
  `
  CREATE INDEX whitelist_account_newest ON whitelist_entries(account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
  `,
  // 3: the change log that keeps every node's admission view current (docs/operations.md Fleet). Triggers write one row per
  // changed admission key in the same transaction as the change, whichever process or code path made it.
  // A row names what changed (kind + key), not the new state: a reader re-reads the key's current state,
  // so rows are idempotent and order-insensitive within a batch. IF NOT EXISTS: safe to re-run on a
  // database whose user_version was rolled back by hand.
  `
  CREATE TABLE IF NOT EXISTS change_log (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('user','ip','account')),
    key  TEXT NOT NULL,
    at   INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER))
  );
  -- Rows up to trimmed_through are gone: a reader whose sequence is below it must reload in full.
  CREATE TABLE IF NOT EXISTS change_log_horizon (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    trimmed_through INTEGER NOT NULL
  );
  INSERT OR IGNORE INTO change_log_horizon (id, trimmed_through) VALUES (1, 0);

  CREATE TRIGGER IF NOT EXISTS change_log_proxy_user_insert AFTER INSERT ON proxy_users BEGIN
    INSERT INTO change_log (kind, key) VALUES ('user', NEW.username);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_proxy_user_update AFTER UPDATE OF username, password_hash, status, account_id ON proxy_users BEGIN
    INSERT INTO change_log (kind, key) VALUES ('user', NEW.username);
    INSERT INTO change_log (kind, key) SELECT 'user', OLD.username WHERE OLD.username <> NEW.username;
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_proxy_user_delete AFTER DELETE ON proxy_users BEGIN
    INSERT INTO change_log (kind, key) VALUES ('user', OLD.username);
  END;

  CREATE TRIGGER IF NOT EXISTS change_log_whitelist_insert AFTER INSERT ON whitelist_entries BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', NEW.ip);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_whitelist_update AFTER UPDATE OF ip, account_id, status, deleted_at ON whitelist_entries BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', NEW.ip);
    INSERT INTO change_log (kind, key) SELECT 'ip', OLD.ip WHERE OLD.ip <> NEW.ip;
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_whitelist_delete AFTER DELETE ON whitelist_entries BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', OLD.ip);
  END;

  -- Admission by IP needs the held claim as well as the live entry (start-up repair changes claims alone).
  CREATE TRIGGER IF NOT EXISTS change_log_claim_insert AFTER INSERT ON ip_claims BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', NEW.ip);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_claim_update AFTER UPDATE OF ip, account_id, state ON ip_claims BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', NEW.ip);
    INSERT INTO change_log (kind, key) SELECT 'ip', OLD.ip WHERE OLD.ip <> NEW.ip;
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_claim_delete AFTER DELETE ON ip_claims BEGIN
    INSERT INTO change_log (kind, key) VALUES ('ip', OLD.ip);
  END;

  CREATE TRIGGER IF NOT EXISTS change_log_account_insert AFTER INSERT ON accounts BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', NEW.id);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_account_status AFTER UPDATE OF status ON accounts WHEN OLD.status IS NOT NEW.status BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', NEW.id);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_account_delete AFTER DELETE ON accounts BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', OLD.id);
  END;
  `,
  // 4: the connection log: one row per refused attempt and per admitted connection at its end. No
  // foreign key to accounts: a record outlives nothing it names, and an insert must never wait on one.
  // IF NOT EXISTS, as migration 3: safe on a database whose user_version was rolled back by hand.
  `
  CREATE TABLE IF NOT EXISTS connection_log (
    id          INTEGER PRIMARY KEY,
    started_ms  INTEGER NOT NULL,
    node        TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    protocol    TEXT NOT NULL,
    source_ip   TEXT NOT NULL,
    username    TEXT,
    account_id  INTEGER,
    target      TEXT,
    reason      TEXT,
    bytes_up    INTEGER NOT NULL,
    bytes_down  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS connection_log_started ON connection_log(started_ms);
  CREATE INDEX IF NOT EXISTS connection_log_account ON connection_log(account_id, id);
  -- Unique: a batch written again (after an error whose outcome was unknown) adds nothing.
  CREATE UNIQUE INDEX IF NOT EXISTS connection_log_request ON connection_log(request_id);
  `,
  // 5: usage metering: buckets per account, subject (`user:NAME`, `ip:A.B.C.D`), period and writing node
  // (each node updates only its own rows: no two nodes wait on one row; reads sum over nodes), and the
  // ids of applied flushes (a flush sent twice adds once). Replaces the count-at-close traffic table, which
  // stays (unused) for a downgrade.
  `
  CREATE TABLE IF NOT EXISTS usage_buckets (
    account_id  INTEGER NOT NULL,
    period      TEXT NOT NULL CHECK (period IN ('minute','hour','day')),
    start_ms    INTEGER NOT NULL,
    subject     TEXT NOT NULL,
    node        TEXT NOT NULL,
    bytes_up    INTEGER NOT NULL DEFAULT 0,
    bytes_down  INTEGER NOT NULL DEFAULT 0,
    connections INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, period, start_ms, subject, node)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS usage_buckets_age ON usage_buckets(period, start_ms);
  CREATE TABLE IF NOT EXISTS usage_flushes (
    flush_id TEXT PRIMARY KEY,
    at_ms    INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS usage_flushes_age ON usage_flushes(at_ms);
  `,
  // 6: plans and limits: one plan per account; per proxy user, limits inside it.
  `
  CREATE TABLE IF NOT EXISTS plans (
    account_id      INTEGER PRIMARY KEY,
    traffic_limit   INTEGER,
    period          TEXT NOT NULL DEFAULT 'month' CHECK (period IN ('day','month','lifetime')),
    anchor_day      INTEGER NOT NULL DEFAULT 1 CHECK (anchor_day BETWEEN 1 AND 28),
    max_connections INTEGER,
    expires_at_ms   INTEGER,
    updated_at      INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS user_limits (
    proxy_user_id   INTEGER PRIMARY KEY REFERENCES proxy_users(id) ON DELETE CASCADE,
    traffic_limit   INTEGER,
    max_connections INTEGER
  );
  `,
  // 7: connection slots leased per node (a fleet-wide cap on concurrent connections). A row per
  // capped key and node; a node that stops renewing loses its lease when it expires.
  `
  CREATE TABLE IF NOT EXISTS slot_leases (
    key           TEXT NOT NULL,
    node          TEXT NOT NULL,
    slots         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    PRIMARY KEY (key, node)
  ) WITHOUT ROWID;
  `,
  // 8: a counter of changes to plans and user limits (and to the usernames they are read under), so a node
  // reads the plan tables again only when they changed, not twice a second (a 100,000-user plan table).
  `
  CREATE TABLE IF NOT EXISTS plan_version (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
  );
  INSERT OR IGNORE INTO plan_version (id, seq) VALUES (1, 0);
  CREATE TRIGGER IF NOT EXISTS plan_version_plans_insert AFTER INSERT ON plans BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_plans_update AFTER UPDATE ON plans BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_plans_delete AFTER DELETE ON plans BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_user_limits_insert AFTER INSERT ON user_limits BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_user_limits_update AFTER UPDATE ON user_limits BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_user_limits_delete AFTER DELETE ON user_limits BEGIN UPDATE plan_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS plan_version_user_rename AFTER UPDATE OF username ON proxy_users BEGIN UPDATE plan_version SET seq = seq + 1; END;
  `,
  // 9: an entry node's records name the exit (entries run on PostgreSQL, the columns keep the two
  // backends' rows alike).
  `
  ALTER TABLE connection_log ADD COLUMN exit TEXT;
  ALTER TABLE connection_log ADD COLUMN exit_moved_from TEXT;
  `,
  // 10: usage per registrable domain of the target, per day, subject and writing node (as usage_buckets: no two
  // nodes wait on one row); pruned with the day buckets.
  `
  CREATE TABLE IF NOT EXISTS usage_domains (
    account_id  INTEGER NOT NULL,
    day_ms      INTEGER NOT NULL,
    subject     TEXT NOT NULL,
    node        TEXT NOT NULL,
    domain      TEXT NOT NULL,
    bytes_up    INTEGER NOT NULL DEFAULT 0,
    bytes_down  INTEGER NOT NULL DEFAULT 0,
    connections INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day_ms, subject, node, domain)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS usage_domains_age ON usage_domains(day_ms);
  `,
  // 11: webhooks: one per account, and the events to deliver (once per account and key: a threshold of a period,
  // an expiry), claimed by one process at a time.
  `
  CREATE TABLE IF NOT EXISTS webhooks (
    account_id INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    url        TEXT NOT NULL,
    thresholds TEXT NOT NULL,
    secret     TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS webhook_events (
    id               TEXT PRIMARY KEY,
    account_id       INTEGER NOT NULL,
    type             TEXT NOT NULL,
    once_key         TEXT NOT NULL,
    body             TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status      INTEGER,
    next_at_ms       INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    claimed_by       TEXT,
    claimed_until_ms INTEGER,
    UNIQUE (account_id, once_key)
  );
  CREATE INDEX IF NOT EXISTS webhook_events_due ON webhook_events(state, next_at_ms);
  `,
  // 12: a SOCKS5 UDP association's record counts its datagrams each way (null on every other record).
  `
  ALTER TABLE connection_log ADD COLUMN datagrams_up INTEGER;
  ALTER TABLE connection_log ADD COLUMN datagrams_down INTEGER;
  `,
  // 13: target rules (docs/gateway.md, "Target rules"): an account's deny and allow lists, account_id 0 the
  // service's; canonical items joined by commas. A change is logged as its account's, so every node's admission
  // view re-reads the rules with the account (the log's kinds stay as shipped).
  `
  CREATE TABLE IF NOT EXISTS target_rules (
    account_id INTEGER PRIMARY KEY,
    deny       TEXT NOT NULL DEFAULT '',
    allow      TEXT NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
  );
  CREATE TRIGGER IF NOT EXISTS change_log_target_rules_insert AFTER INSERT ON target_rules BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', NEW.account_id);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_target_rules_update AFTER UPDATE ON target_rules BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', NEW.account_id);
  END;
  CREATE TRIGGER IF NOT EXISTS change_log_target_rules_delete AFTER DELETE ON target_rules BEGIN
    INSERT INTO change_log (kind, key) VALUES ('account', OLD.account_id);
  END;
  `,
  // 14: rate limits (bits per second, each direction, per node) on plans and proxy users' limits; the plan
  // version triggers of migration 8 already fire on these updates.
  `
  ALTER TABLE plans ADD COLUMN rate_limit INTEGER;
  ALTER TABLE user_limits ADD COLUMN rate_limit INTEGER;
  `,
  // 15: what a minute bucket holds that its hour and day buckets do not hold yet (PostgreSQL's migration 19, where
  // flushes write minutes only and a roll-up folds them). Here a flush still writes all three periods, so these
  // stay 0 (and `unrolled` false); they exist so both backends read with the same queries (usage-sql.ts).
  `
  ALTER TABLE usage_buckets ADD COLUMN roll_up INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage_buckets ADD COLUMN roll_down INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage_buckets ADD COLUMN roll_conn INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage_buckets ADD COLUMN unrolled INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX IF NOT EXISTS usage_buckets_unrolled ON usage_buckets(account_id, start_ms) WHERE period = 'minute' AND unrolled;
  `,
  // 16: account security (docs/security.md): the audit log, one hash chain per account (a record's seq is its
  // place in its chain; its hash covers the previous record's hash and its own canonical JSON), each chain's head
  // (locked by every write of the chain) and anchor (where verification starts once retention removed records);
  // the second factor: a TOTP secret sealed with the console's key, the newest time step taken (a code is
  // accepted once), the wrong attempts that lock the second step, hashed recovery codes, and passkeys.
  `
  CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    time_ms     INTEGER NOT NULL,
    actor_type  TEXT NOT NULL,
    actor_id    TEXT,
    source_ip   TEXT,
    request_id  TEXT,
    action      TEXT NOT NULL,
    target      TEXT,
    details     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    once_key    TEXT,
    UNIQUE (account_id, seq)
  );
  CREATE UNIQUE INDEX IF NOT EXISTS audit_log_once ON audit_log(account_id, once_key) WHERE once_key IS NOT NULL;
  CREATE INDEX IF NOT EXISTS audit_log_time ON audit_log(time_ms);
  CREATE TABLE IF NOT EXISTS audit_heads (
    account_id  INTEGER PRIMARY KEY,
    seq         INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    anchor_seq  INTEGER NOT NULL,
    anchor_hash TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS second_factors (
    account_id      INTEGER PRIMARY KEY REFERENCES accounts(id),
    totp_secret     TEXT,
    totp_enabled_ms INTEGER,
    totp_last_step  INTEGER NOT NULL DEFAULT 0,
    fail_times      TEXT NOT NULL DEFAULT '',
    locked_until_ms INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS recovery_codes (
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    code_hash  TEXT NOT NULL,
    used_ms    INTEGER,
    PRIMARY KEY (account_id, code_hash)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS passkeys (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts(id),
    credential_id TEXT NOT NULL UNIQUE,
    public_key    BLOB NOT NULL,
    counter       INTEGER NOT NULL,
    transports    TEXT NOT NULL DEFAULT '',
    name          TEXT NOT NULL,
    created_ms    INTEGER NOT NULL,
    last_used_ms  INTEGER
  );
  CREATE INDEX IF NOT EXISTS passkeys_account ON passkeys(account_id);
  `,
  // 17: API keys (docs/api.md, "Authentication"): the public id is the primary key (what a request names), the
  // secret only as its SHA-256 (256 random bits: a fast hash is enough), scopes and allowed sources as
  // comma-separated canonical lists, times in seconds. Revoked keys stay (the console and `admin key list` show them).
  `
  CREATE TABLE IF NOT EXISTS api_keys (
    id           TEXT PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    name         TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    secret_hash  BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    allowed_ips  TEXT NOT NULL DEFAULT '',
    revoked_at   INTEGER,
    last_used_at INTEGER,
    last_used_ip TEXT
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys(account_id, created_at);
  `,
  // 18: the customer API (docs/api.md, "Proxy users"): a proxy user's own expiry and target rules beside its limits
  // (the plan version's triggers of migration 8 fire on them), and Idempotency-Key answers, per account and key,
  // kept 24 h (status null: claimed, its request still running).
  `
  ALTER TABLE user_limits ADD COLUMN expires_at_ms INTEGER;
  ALTER TABLE user_limits ADD COLUMN allow TEXT NOT NULL DEFAULT '';
  ALTER TABLE user_limits ADD COLUMN deny TEXT NOT NULL DEFAULT '';
  CREATE TABLE IF NOT EXISTS idempotency_keys (
    account_id    INTEGER NOT NULL,
    key           TEXT NOT NULL,
    method        TEXT NOT NULL,
    path          TEXT NOT NULL,
    body_hash     TEXT NOT NULL,
    status        INTEGER,
    response      TEXT,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (account_id, key)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS idempotency_keys_age ON idempotency_keys(created_at_ms);
  `,
  // 19: dedicated egress addresses (docs/admin.md, "ip"): what each node offers (its pool, else its local
  // addresses) with its location, the account holding each (assigned), or a quarantine until a time (seconds);
  // replacements per account and calendar month; usage by address and UTC day (docs/api.md, usage summary `ips`);
  // a version every node polls, bumped by any change of an address.
  `
  CREATE TABLE IF NOT EXISTS egress_addresses (
    address          TEXT PRIMARY KEY,
    node             TEXT NOT NULL,
    country          TEXT,
    city             TEXT,
    account_id       INTEGER REFERENCES accounts(id),
    assigned_at      INTEGER,
    quarantine_until INTEGER,
    registered_at    INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS egress_addresses_account ON egress_addresses(account_id) WHERE account_id IS NOT NULL;
  CREATE INDEX IF NOT EXISTS egress_addresses_node ON egress_addresses(node);
  CREATE TABLE IF NOT EXISTS egress_replacements (
    account_id INTEGER NOT NULL,
    month      TEXT NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (account_id, month)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS egress_usage (
    account_id  INTEGER NOT NULL,
    address     TEXT NOT NULL,
    day_ms      INTEGER NOT NULL,
    bytes_up    INTEGER NOT NULL,
    bytes_down  INTEGER NOT NULL,
    connections INTEGER NOT NULL,
    PRIMARY KEY (account_id, day_ms, address)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS egress_version (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
  INSERT OR IGNORE INTO egress_version (id, seq) VALUES (1, 0);
  CREATE TRIGGER IF NOT EXISTS egress_version_insert AFTER INSERT ON egress_addresses BEGIN UPDATE egress_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS egress_version_update AFTER UPDATE ON egress_addresses BEGIN UPDATE egress_version SET seq = seq + 1; END;
  CREATE TRIGGER IF NOT EXISTS egress_version_delete AFTER DELETE ON egress_addresses BEGIN UPDATE egress_version SET seq = seq + 1; END;
  `,
  // 20: an address its node no longer offers but an account holds or a quarantine keeps: marked, never handed to
  // anyone new, gone at the node's next start once free (docs/operations.md, "Dedicated addresses").
  `
  ALTER TABLE egress_addresses ADD COLUMN withdrawn INTEGER NOT NULL DEFAULT 0;
  `,
];
