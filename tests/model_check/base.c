/* The start-up every static glibc program shares: its counts are subtracted from the others. */
int main(void) { return 0; }
