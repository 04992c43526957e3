-- ARGV: prefix, ids... -> the doc values of the live ids (absent ids omitted).
local p = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local s = redis.call('HGET', p .. 'ids', ARGV[i])
  if s then
    local v = redis.call('GET', p .. 'd:' .. s)
    if v then out[#out + 1] = s out[#out + 1] = v end
  end
end
return out
