"""Language-model heads of HRM (HRM-LM and its UniTF control, HRM-Text, HAM), registered beside the puzzle models."""
