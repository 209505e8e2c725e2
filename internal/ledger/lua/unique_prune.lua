-- unique_prune.lua: remove released entries from a queue's unique index: a
-- key whose job is gone (expired after retention), has left its unique
-- states or holds another key (its id, named by an operation id, used again
-- after it expired), and a key of a period that has ended. Enqueues already treat such
-- entries as free; this only bounds the index's size.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua, KEYS 1-2); KEYS 3 the queue's
--   unique index ns:{q}:unique.
-- ARGV 2 HSCAN cursor ('0' to start)   3 HSCAN COUNT
-- Reply: {next cursor ('0' when the scan is complete), entries removed}
local uniqk = KEYS[3]
local res = redis.call('HSCAN', uniqk, ARGV[2], 'COUNT', num(ARGV[3]))
local kv, gone = res[2], {}
for i = 1, #kv, 2 do
  local ukey, hid = kv[i], kv[i + 1]
  local released = false
  local period, bucket = string.match(ukey, ':(%d+):(%d+)$')
  if period and num(bucket) < math.floor(now / num(period)) then released = true end
  if not released then
    local h = jobread(jobkey(hid), 'state', 'ustates', 'ukey')
    released = true
    if h[1] and h[2] and h[3] == ukey then
      for s in string.gmatch(h[2], '[^,]+') do
        if s == h[1] then released = false end
      end
    end
  end
  if released then gone[#gone + 1] = ukey end
end
if #gone > 0 then call_chunked('HDEL', uniqk, gone, 1000) end
return {res[1], #gone}
