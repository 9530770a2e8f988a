"""The sample domain and the demo: a travel desk (`travel`: trips with legs, rebooking through an
airline that may answer, refuse or never answer; `travel_model`, its state model for exploration;
`travel_pg`, the same desk kept in PostgreSQL for real-process runs), the fake airline the outbox
reaches (`airline`), the words the scripted processes say (`sayings`), the travel desk's harness
(`desk.DeskHarness`) and `turnframe demo` (`demo`). The only place domain words live; the rest of
the test kit serves any adopter's domain."""
