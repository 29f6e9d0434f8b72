-- 0029_quotas: team GPU quotas (docs/quotas.md).
--
-- One row per team (or org) and flavor: a GPU model, or a pool group for
-- the pools in one.  A row whose `team` another row names as its `org` is
-- that org's own quota.  The rules a whole set must keep (no org in
-- itself, two levels, one org per team, a known flavor) are checked by the
-- scheduler's quota module (controller/sched/quota.h) before a write, not
-- here, so that the live controller, the API and the replay keep one copy
-- of them; the table holds only what a single row must be.
--
-- Every write of the set bumps quota_version.v, guarded on the version the
-- API read with the set it checked: a concurrent writer's UPDATE waits for
-- the first and then finds the version moved, so two writers never combine
-- into a set neither checked.
CREATE TABLE quotas (
    team            text NOT NULL CHECK (team <> ''),
    flavor          text NOT NULL CHECK (flavor <> ''),
    gpus            bigint NOT NULL CHECK (gpus >= 0),
    borrowing_limit bigint CHECK (borrowing_limit >= 0),   -- NULL: unlimited
    lending_limit   bigint CHECK (lending_limit >= 0),     -- NULL: all of the idle quota
    org             text CHECK (org <> '' AND org <> team), -- NULL: none
    weight          double precision NOT NULL DEFAULT 1 CHECK (weight > 0),
    updated_ms      bigint NOT NULL,
    updated_by      text NOT NULL,
    PRIMARY KEY (team, flavor)
);

CREATE TABLE quota_version (
    id  int PRIMARY KEY CHECK (id = 1),
    v   bigint NOT NULL
);
INSERT INTO quota_version VALUES (1, 0);

-- A quota set or removed is a decision about its team: subject 'quota',
-- id 'team:flavor'.
ALTER TABLE decisions DROP CONSTRAINT decisions_subject_kind_check;
ALTER TABLE decisions ADD CONSTRAINT decisions_subject_kind_check
    CHECK (subject_kind IN ('job', 'node', 'pool', 'instance', 'budget', 'provider', 'quota'));
