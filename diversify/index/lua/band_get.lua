-- KEYS: band keys -> {[u32 position, u32 length]..., values...}: two strings, so that the client
-- parses two replies, not one per key (a batch of queries finds most of its keys).
local meta, vals = {}, {}
for lo = 1, #KEYS, 4000 do
  local got = redis.call('MGET', unpack(KEYS, lo, math.min(lo + 3999, #KEYS)))
  for j = 1, #got do
    if got[j] then
      meta[#meta + 1] = struct.pack('<I4I4', lo + j - 2, #got[j])
      vals[#vals + 1] = got[j]
    end
  end
end
return {table.concat(meta), table.concat(vals)}
