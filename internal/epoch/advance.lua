-- advance.lua (internal/epoch): learn the fencing epoch of the primary this runs on.
-- KEYS[1] the namespace's epoch record <ns>:epoch: hash 'r:<replication id>' -> epoch,
--         'max' -> the highest epoch recorded, 'born' -> its birth (and the namespace's
--         time, 'clk', 'crid', 'coff', which lib.lua's epoch_now keeps and this script
--         leaves alone)
-- ARGV[1] the master's config epoch from its Sentinels ('' without Sentinel)
-- ARGV[2] the highest epoch the caller ever minted with
-- ARGV[3] the replication id of the primary the caller last minted on ('' for none)
-- ARGV[4] the caller's epoch for that primary
-- ARGV[5] '' or, when the caller's previous run assigned this primary an epoch and the
--         Sentinels' epoch rose since, that epoch: raised to ARGV[1] if still recorded
-- ARGV[6] the birth of the record the caller learned ARGV[4] from ('' for none)
-- Reply: {replication id, epoch, capped, assigned, born, lost}: capped 1 when the epoch
--        was capped at EPOCH_MAX, assigned 1 when this run gave the primary its first
--        epoch, born the record's birth (its 'born' field: the Redis time in µs it was
--        created at), lost 1 when the record the caller knew is gone;
--        {'', '0', '0', '0', why} when INFO gives no replication id here (epochs off)
--
-- A primary keeps the epoch recorded for its replication id. A replication
-- id seen for the first time (a promoted replica, a restarted primary) gets
-- one above every epoch known (the record's max, the caller's own highest):
--   with Sentinel: its config epoch, which grows with every failover, when
--     it is above them (a failover); else (a restart without failover,
--     Sentinels reset) one more than the highest known;
--   without: one more than the highest known, except on a namespace
--     without a record, reached by a caller that never minted: 0 (or the
--     Sentinels' epoch).
-- A Sentinel epoch never raises a primary's recorded epoch (the node may be
-- an old primary cut off from the Sentinels, whose tokens must stay below
-- the new primary's), except the caller's own fresh assignment (ARGV[5]).
-- Without Sentinel, a caller that minted on another primary with an epoch at
-- least the recorded one moves this primary one above it: the record of
-- that epoch was lost, and this primary's must not collide with it.
-- A caller that minted finds the record lost when its birth is not the one
-- the caller learned (a flush, a restart without persistence, a replica
-- promoted without it: the record was created again), or when it holds no
-- epoch, or a lower one, for the primary the caller minted on: this primary
-- then keeps a recorded epoch only if it is the highest recorded and above
-- every epoch the caller minted in (another caller that found the same loss
-- moved it there: one loss moves it once), else gets one more than the
-- highest known. So a zombie's token, minted in an epoch the record forgot,
-- stays below every token minted after.
local key = KEYS[1]
local F, C, L, EL = tonumber(ARGV[1]), tonumber(ARGV[2]) or 0, ARGV[3], tonumber(ARGV[4]) or 0
local function fmt(n) return string.format('%d', n) end
local rid, why = epoch_replid()
if rid == '' then return {'', '0', '0', '0', why} end -- no replication id: epochs off
local f = redis.call('HMGET', key, 'max', 'r:' .. rid, 'born')
local mx, rec, born = tonumber(f[1] or ''), tonumber(f[2] or ''), f[3]
local known = math.max(mx or 0, C, EL)
local lost = L ~= '' and (born ~= ARGV[6] or (rid == L and not (rec and rec >= EL)))
local e, assigned = nil, 0
if lost then
  if rec and rec >= (mx or 0) and rec > math.max(C, EL) then
    e = rec -- moved above the loss already
  else
    e = rec or F
    if not rec then assigned = 1 end
    if not e or e <= known then e = known + 1 end
  end
elseif rec then
  e = rec
  if F then
    if rec == tonumber(ARGV[5]) and F > e then e = F end
  elseif L ~= '' and rid ~= L and C >= e then
    e = C + 1
  end
else
  assigned = 1
  if mx == nil and L == '' then
    e = F or 0
  elseif F and F > known then
    e = F
  else
    e = known + 1
  end
end
local capped = 0
if e > EPOCH_MAX then e, capped = EPOCH_MAX, 1 end
redis.call('HSET', key, 'r:' .. rid, fmt(e))
if not born then
  local t = redis.call('TIME')
  born = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('HSET', key, 'born', born)
end
if not mx or e > mx then redis.call('HSET', key, 'max', fmt(e)) end
-- Keep the newest 32 primaries: older replication ids never mint again.
if redis.call('HLEN', key) > 64 then
  local all, ids = redis.call('HGETALL', key), {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == 'r:' and all[i] ~= 'r:' .. rid then -- not 'max' nor the time's fields
      table.insert(ids, {all[i], tonumber(all[i + 1]) or 0})
    end
  end
  table.sort(ids, function(a, b) return a[2] < b[2] end)
  for i = 1, #ids - 31 do redis.call('HDEL', key, ids[i][1]) end
end
return {rid, fmt(e), fmt(capped), fmt(assigned), born, lost and '1' or '0'}
