-- raise.lua: record storage refusing an attempt's token (a fence.StaleError
-- from the handler) and, with a mark, make the next token minted for the
-- job greater than it: storage's high-water mark, a token the ledger no
-- longer knows (a failover lost it). The refusal is counted (fenced_storage),
-- put in the queue's events and the job's history, like the ledger's own
-- fenced commits. The mark is kept in the job's 'mark' field; the next claim
-- (claim.lua, bridge_claim.lua) mints above it and clears it. A running
-- attempt goes on: its outcome is still committed by its token, and the
-- attempt after it is the one storage must accept.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 mark (decimal uint64 below 2^64 - 1; '0' to count only)
--      4 the refused attempt's token
-- Reply: 1 when the mark was recorded; 0 when the job's token (or a mark
--        already recorded) is at or above it, or there is no such job.
local id, mark, token = ARGV[2], u64_norm(ARGV[3]), ARGV[4]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'token', 'mark')
if not h[1] then return 0 end
queue_guard()
seq_bump()
count('fenced_storage')
event({type = 'fenced', stage = 'storage', job = id, token = token, current = u64_max(h[2] or '0', mark)})
record(id, {event = 'fenced', stage = 'storage', token = token})
if u64_cmp(u64_max(h[2], h[3]), mark) >= 0 then return 0 end
redis.call('HSET', k, 'mark', mark)
record(id, {event = 'raised', token = h[2] or '0',
  note = 'storage holds token ' .. mark .. ': the next attempt mints above it'})
count('raised')
return 1
