--[[
  A no-op like or unlike in a rebuild window stamps the state it answered.
]]
--@include append-event
--@include rebuild-window
-- A like or unlike that changes nothing answers from a state the rebuild read from
-- PostgreSQL, which may lack an older change of this user still in flight. In the
-- window, the state just answered is stamped as the user's newest change: the
-- late change can then undo it neither in Redis (the record supersedes it) nor in
-- PostgreSQL (the appended change outranks it).
local function confirmAfterRebuild(counters, outbox, touched, targetType, targetId, user, liked)
  if inRebuildWindow(counters) then
    local epoch, micros = appendEvent(counters, outbox, targetType, targetId, user, liked)
    noteChange(touched, user, epoch, micros)
  end
end
