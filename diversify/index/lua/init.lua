-- ARGV: prefix, schema_version, config_json, fingerprint, created_by, layout.
-- Create the meta and state hashes of a new index (an existing one is left as it is); return the meta.
local p = ARGV[1]
if redis.call('EXISTS', p .. 'meta') == 0 then
  redis.call('HSET', p .. 'meta', 'schema_version', ARGV[2], 'config_json', ARGV[3], 'fingerprint', ARGV[4],
             'created_by', ARGV[5], 'layout', ARGV[6])
  redis.call('HSET', p .. 'state', 'next_seq', 0, 'next_cluster', 0, 'id_kind', '', 'layout', '', 'docs', 0, 'reps', 0,
             'band_rows', 0, 'max_seq', -1, 'last_commit', '')
end
return redis.call('HGETALL', p .. 'meta')
