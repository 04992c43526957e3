-- KEYS: lock, fence; ARGV: token.
-- Compare-and-delete: release the lease only while it carries our token (and move the fence on).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('INCR', KEYS[2])
  return redis.call('DEL', KEYS[1])
end
return 0
