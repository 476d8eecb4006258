// Placeholder: replaced by the raw verbs test client.
int main() { return 0; }
