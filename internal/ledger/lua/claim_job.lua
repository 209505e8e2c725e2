-- claim_job.lua: the fenced claim of one pending job, named by id, due or
-- not and whether or not its queue is paused (package fencedqtest runs one
-- job inline in an application's test). The attempt is claim.lua's: a new
-- token above the stored one (and above storage's mark when one was fed
-- back, in the caller's fencing epoch), owner, lease deadline now + ttl,
-- attempt count + 1.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua); KEYS 2 the epoch record.
-- ARGV 2 job id   3 owner   4 lease ttl ms
--      5 replication id of the primary the caller's epoch is for ('' when epochs are off)
--      6 the caller's epoch   7 the birth of the record it was learned from (internal/epoch)
-- Reply: {1, token, deadline ms, attempt}, or {0, why}: 'missing', 'bridged'
--   (its own queue delivers it) or the job's state when it is not pending,
--   or {-1, replication id, recorded epoch} when the caller must refresh its
--   epoch (internal/epoch): nothing was written
local id, owner, ttl = ARGV[2], ARGV[3], num(ARGV[4])
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'token', 'attempts', 'hist', 'fence', 'bridge', 'mark', 'group', 'wait', 'lkey', 'rkey')
if h[1] ~= 'pending' then return {0, h[1] or 'missing'} end
if h[6] then return {0, 'bridged'} end
local last = h[2] or '0'
if h[7] then last = u64_max(last, h[7]) end
local ep, stale = epoch_check(KEYS[2], ARGV[5], ARGV[6], ARGV[7], epoch_rec, epoch_born)
if not ep then return {-1, stale[1], stale[2]} end
if h[7] then redis.call('HDEL', k, 'mark') end
-- tokens above 2^53 (epochs 2 and up) are added to exactly, as strings,
-- so the new token is strictly above the stored one
local stok, sdeadline, attempt = token_mint(last, ep, now_us), fmt(now + ttl), cnt(h[3]) + 1
queue_guard()
seq_bump()
redis.call('HSET', k, 'state', 'running', 'token', stok, 'owner', owner, 'deadline', sdeadline,
  'attempts', attempt, 'started', snow)
if h[5] then redis.call('HDEL', k, 'fence') end
if h[4] then record(id, {event = 'attempt', attempt = attempt, token = stok, owner = owner}) end
move(id, 'pending', 'running', now + ttl)
if h[8] then group_leave(id, h[8]) end -- its group's next job leads (group.lua)
-- held back by flow control, it leaves what it waited in (flow.lua): the
-- inline run takes no permit and no rate start
if h[9] == 'limit' and h[10] then redis.pcall('ZREM', limit_waiting(h[10]), id) end -- another type: holds no job
if h[9] == 'rate' and h[11] then flow_unhold(id, h[11]) end
if h[9] then redis.call('HDEL', k, 'wait', 'wait_at') end
count('attempted')
return {1, stok, sdeadline, attempt}
