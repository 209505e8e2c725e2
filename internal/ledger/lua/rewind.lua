-- rewind.lua: record a rewind of the queue's ledger that a client, pool or
-- bridge detected (see rewind.go): Redis came back with older data (a
-- failover to a lagging replica, a restart from an older snapshot), so the
-- queue's write sequence went back. Detections of one loss are merged: a
-- loss is found on the primary that has the older data, so records are
-- kept per replication id of that primary.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua); KEYS 3 the queue's
--   rewind records <ns>:{<queue>}:rewinds, a hash: replication id -> JSON
-- ARGV 2 'detected' or 'resubmitted'
--   detected: 3 write sequence the detector saw before   4 the sequence it found
--             5 enqueued jobs lost, at least   6 the detector's recorded enqueues
--             certainly lost   7 detector (pool id, client, bridge)
--   resubmitted: 3 jobs a client re-created from its record   4 detector
-- Reply: {1 when a new record was made (the loss was not known yet) else 0,
--   the record's replication id, its first_at}: the record names the loss.
local rk = KEYS[3]
queue_guard({'stats', 'minute', 'events'}, {{rk, 'hash'}})
local rid = epoch_replid()
if rid == '' then rid = 'unknown' end
local cur = redis.call('HGET', rk, rid)
local rec = nil
if cur then
  local ok, r = pcall(cjson.decode, cur)
  if ok and type(r) == 'table' then rec = r end
end
local created = 0
if not rec then
  created = 1
  rec = {replication_id = rid, first_at = now, known = 0, found = -1, lost_enqueues = 0,
         lost_recorded = 0, detections = 0, detected_by = '', resubmitted = 0}
end
rec.last_at = now
if ARGV[2] == 'detected' then
  local known, found = num(ARGV[3]), num(ARGV[4])
  rec.known = math.max(num(rec.known), known)
  if num(rec.found) < 0 or found < num(rec.found) then rec.found = found end
  rec.lost_enqueues = math.max(num(rec.lost_enqueues), num(ARGV[5]))
  rec.lost_recorded = math.max(num(rec.lost_recorded), num(ARGV[6]))
  rec.detections = num(rec.detections) + 1
  if rec.detected_by == '' then rec.detected_by = ARGV[7] end
  if created == 1 then
    count('rewinds')
    event({type = 'rewind', actor = ARGV[7], note = 'the ledger went back from write ' .. fmt(known) ..
      ' to write ' .. fmt(found) .. ': acknowledged writes were lost (at least ' .. fmt(num(ARGV[5])) ..
      ' enqueued jobs)'})
  end
else
  rec.resubmitted = num(rec.resubmitted) + num(ARGV[3])
  if rec.detected_by == '' then rec.detected_by = ARGV[4] end
end
redis.call('HSET', rk, rid, cjson.encode(rec))
-- Keep the newest 20 records.
if redis.call('HLEN', rk) > 20 then
  local all, recs = redis.call('HGETALL', rk), {}
  for i = 1, #all, 2 do
    local ok, r = pcall(cjson.decode, all[i + 1])
    recs[#recs + 1] = {all[i], ok and type(r) == 'table' and num(r.last_at) or 0}
  end
  table.sort(recs, function(a, b) return a[2] < b[2] end)
  for i = 1, #recs - 20 do redis.call('HDEL', rk, recs[i][1]) end
end
return {created, rid, num(rec.first_at)}
