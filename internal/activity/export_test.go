package activity

// ChangeNotifier lets the tests check which providers notify.
type ChangeNotifier = changeNotifier
