-- ARGV: prefix, blob of 16-byte cluster records -> seq8, value pairs of every member.
local p = ARGV[1]
local out = {}
local blob = ARGV[2]
for i = 1, #blob, 16 do
  local v = redis.call('HGET', p .. 'c:' .. string.sub(blob, i, i + 7), string.sub(blob, i + 8, i + 15))
  if v then
    for j = 1, #v, 8 do
      local s = string.sub(v, j, j + 7)
      local d = redis.call('GET', p .. 'd:' .. s)
      if d then out[#out + 1] = s out[#out + 1] = d end
    end
  end
end
return out
