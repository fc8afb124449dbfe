// The responders that capture answers (RecordingResponder, CaptureResponder) and the HTTP values live in
// HTTPCore; a test that imports MirrorgateTesting gets them too.
@_exported import HTTPCore
