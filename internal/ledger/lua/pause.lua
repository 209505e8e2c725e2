-- pause.lua: an operator pauses or resumes the queue. Claims skip a paused
-- queue; running attempts go on; enqueues are still accepted.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 'pause' or 'resume'   3 actor   4 note
--      5 pause: the pause's id ('' none); resume: the id of the pause the
--        caller saw ('' any pause; '-' a pause recorded without an id)
-- Reply: 1 when the queue's state changed, 0 when it already was so, -1 when
--   a resume found the queue paused by another pause than the one seen
--   (nothing changed).
queue_guard({'events'})
local changed
local id = ARGV[5] or ''
if ARGV[2] == 'pause' then
  local rec = {actor = ARGV[3], note = ARGV[4], at = fmt(now)}
  if id ~= '' then rec.id = id end
  changed = redis.call('SET', pausedk, cjson.encode(rec), 'NX')
  changed = changed and 1 or 0
else
  if id ~= '' then
    local cur = redis.call('GET', pausedk)
    if cur then
      local ok, rec = pcall(cjson.decode, cur)
      local want = id
      if want == '-' then want = nil end
      if not ok or type(rec) ~= 'table' or rec.id ~= want then return -1 end
    end
  end
  changed = redis.call('DEL', pausedk)
  if changed == 1 then redis.call('SET', idlek, '1'); wake() end
end
if changed == 1 then event({type = ARGV[2], actor = ARGV[3], note = ARGV[4]}) end
return changed
