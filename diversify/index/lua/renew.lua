-- KEYS: lock, fence; ARGV: token, lease in ms.
-- Renew our lease; an expired one only if no other writer asked for it since.
local lock = redis.call('GET', KEYS[1])
if lock == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if lock == false and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
