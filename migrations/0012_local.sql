-- 0012_local.sql: pools may use the local provider (providers/local/), whose
-- nodes are `tarmac agent` processes on the controller's machine.
ALTER TABLE pools DROP CONSTRAINT IF EXISTS pools_provider_kind_check;
ALTER TABLE pools ADD CONSTRAINT pools_provider_kind_check
    CHECK (provider_kind IN ('sim', 'aws', 'gcp', 'azure', 'local'));
