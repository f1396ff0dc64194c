"""tidelog.coordinator"""
