-- handover_ack.lua: remove delivered hand-over records, each only if it is
-- still the one delivered (a newer end of the same dependency, written
-- meanwhile, stays for its own delivery).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV from 2, 2 values per record: field, value (as read before delivery)
-- Reply: the number removed.
queue_guard({'handover'})
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('HGET', P .. 'handover', ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', P .. 'handover', ARGV[i])
    n = n + 1
  end
end
return n
